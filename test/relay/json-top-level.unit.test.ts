// The walk over a JSON body's top-level object for the keys it tracks (src/relay/body/json-top-level.ts):
// only a top-level key counts (not one inside a nested value or a string), keys compared decoded
// (escapes), several keys at once, a key that occurs twice (the last value kept, each value's end
// told), Python's literals, a UTF-8 byte order mark, bodies Python reads as UTF-16 or UTF-32, a
// body cut short, a body in pieces (each byte walked once), the byte limit, what is not an object
// or is malformed, and generated documents checked against JSON.parse.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Outcome, TopLevelWalk, type ValueKind } from '../../src/relay/body/json-top-level.js';

interface Found {
  outcome: Outcome;
  /** The key's last whole value: its kept text (a string's between its quotes, nothing of a nested one) and its kind. */
  last?: [string, ValueKind];
  /** The key's value the bytes ran out in: its kept text so far, and its kind. */
  open?: [string, ValueKind];
  walked: number;
}

/** One walk of `text` for `key`, cut into pieces at `cuts`, up to `max` bytes. */
function find(text: string | Buffer, key = 'k', cuts: number[] = [], max = Infinity): Found {
  const body = typeof text === 'string' ? Buffer.from(text) : text;
  const ends = [...cuts, body.length];
  const pieces = ends.map((end, i) => body.subarray(i === 0 ? 0 : ends[i - 1]!, end));
  const walk = new TopLevelWalk([key], [64]);
  walk.walkPieces(pieces, max);
  const found: Found = { outcome: walk.outcome, walked: walk.walked };
  const v = walk.values[0]!;
  if (v.count > 0) found.last = [Buffer.from(v.bytes).toString(), v.kind];
  if (walk.openKey === 0 && walk.outcome === 'open') found.open = [Buffer.from(walk.openBytes()).toString(), walk.openKind];
  return found;
}

test("the key's value at the top level: a string, a nested value or a literal, spaces around it", () => {
  assert.deepEqual(find('{"k":"v"}'), { outcome: 'closed', last: ['v', 'string'], walked: 9 });
  assert.deepEqual(find(' \r\n{ "a" : 1 ,\t"k" :\n{"x":[1,"}"]} } trailing'), { outcome: 'closed', last: ['{"x":[1,"}"]}', 'nested'], walked: 36 });
  assert.deepEqual(find('{"k":[1,[2]],"z":0}').last, ['[1,[2]]', 'nested']);
  for (const literal of ['true', 'false', 'null', '-1.5e3', '0', 'NaN', 'Infinity', '-Infinity']) {
    assert.deepEqual(find(`{"k":${literal}}`).last, [literal, 'literal'], literal);
    assert.deepEqual(find(`{"k":${literal} ,"z":1}`).last, [literal, 'literal'], `${literal}, then a space`);
  }
  assert.deepEqual(find('{}'), { outcome: 'closed', walked: 2 });
  assert.deepEqual(find('{"a":1}'), { outcome: 'closed', walked: 7 });
  assert.deepEqual(find('{"a":NaN,"k":1}').last, ['1', 'literal'], "Python's NaN before the key");
});

test('a key inside a nested value or inside a string is not at the top level', () => {
  for (const text of [
    '{"a":{"k":"nested"}}',
    '{"a":[{"k":"in an array"}],"b":["k","x"]}',
    '{"a":"\\"k\\": \\"in a string\\""}',
    '{"a":"k"}',
    '{"a":{"b":"}"},"c":"{\\"k\\":1}"}',
  ]) {
    const found = find(text);
    assert.equal(found.outcome, 'closed', text);
    assert.equal(found.last, undefined, text);
  }
  // After such values, the top-level key is still found.
  assert.deepEqual(find('{"a":{"k":1,"s":"]}"},"b":"\\"k\\":2","k":3}').last, ['3', 'literal']);
});

test('keys are compared decoded, as Python reads them; values kept as written', () => {
  assert.deepEqual(find('{"k":"a\\"b\\\\"}').last, ['a\\"b\\\\', 'string']);
  assert.deepEqual(find('{"a\\\\":"k","k":"v"}').last, ['v', 'string'], 'a key ending with an escaped backslash');
  assert.deepEqual(find('{"a\\"k":1,"k":2}').last, ['2', 'literal'], 'an escaped quote inside a key');
  for (const text of ['{"\\u006b":1}', '{"\\u006B":1}', '{"\\u006b" : 1}']) assert.deepEqual(find(text).last, ['1', 'literal'], text);
  assert.deepEqual(find('{"m\\u006fdel":"x"}', 'model').last, ['x', 'string']);
  assert.deepEqual(find('{"max\\u005ftokens":9}', 'max_tokens').last, ['9', 'literal']);
  assert.deepEqual(find('{"\\/k":1,"k":2}').last, ['2', 'literal'], '\\/ is a slash');
  for (const text of ['{"kk":1}', '{"":1}', '{"k\\"":1}', '{"k\\u0000":1}', '{"\\u006bk":1}', '{"\\uD800k":1}', '{"\u00ebk":1}', '{"\\x6b":1}', '{"\\u00zz":1}']) {
    assert.equal(find(text).last, undefined, text);
  }
  assert.deepEqual(find('{"model":1,"models":2,"mode":3}', 'model').last, ['1', 'literal']);
});

test('several keys at once, each its own last value; the listener hears every value that ends', () => {
  const heard: number[] = [];
  const walk = new TopLevelWalk(['model', 'max_tokens', 'max_completion_tokens'], [16, 8, 8], { onValue: (k) => heard.push(k) });
  walk.feed(Buffer.from('{"max_tokens":1,"model":"a","x":{"max_tokens":5},"max_tokens":"900","max_completion_tokens":null,"model":"a"}'));
  assert.equal(walk.outcome, 'closed');
  assert.deepEqual(heard, [1, 0, 1, 2, 0]);
  const [model, max, completion] = walk.values;
  assert.deepEqual([model!.count, Buffer.from(model!.bytes).toString()], [2, 'a']);
  assert.deepEqual([max!.count, max!.kind, Buffer.from(max!.bytes).toString()], [2, 'string', '900']);
  assert.deepEqual([completion!.count, Buffer.from(completion!.bytes).toString()], [1, 'null']);
});

test('a value longer than its key keeps is measured, not kept', () => {
  const walk = new TopLevelWalk(['k'], [4]);
  walk.feed(Buffer.from('{"k":"abcdefgh"}'));
  const v = walk.values[0]!;
  assert.equal(Buffer.from(v.bytes).toString(), 'abcd');
  assert.equal(v.length, 8);
  const cut = new TopLevelWalk(['k'], [4]);
  for (const piece of ['{"k":12', '34567', '8}']) cut.feed(Buffer.from(piece));
  assert.deepEqual([Buffer.from(cut.values[0]!.bytes).toString(), cut.values[0]!.length], ['1234', 8]);
});

test('a key that occurs twice counts with its last value', () => {
  assert.deepEqual(find('{"k":"first","x":0,"k":{"second":1}}').last, ['{"second":1}', 'nested']);
  assert.deepEqual(find('{"k":true,"k":false}').last, ['false', 'literal']);
  // Cut short in the second value: the first is the last whole one, the second is open.
  assert.deepEqual(find('{"k":true,"k":"sec'), { outcome: 'open', last: ['true', 'literal'], open: ['sec', 'string'], walked: 18 });
});

test('a body cut short: open, with the value it stopped in', () => {
  assert.deepEqual(find('{"k":"ab'), { outcome: 'open', open: ['ab', 'string'], walked: 8 });
  assert.deepEqual(find('{"k":[1,{"a":"]'), { outcome: 'open', open: ['[1,{"a":"]', 'nested'], walked: 15 });
  assert.deepEqual(find('{"k":fals'), { outcome: 'open', open: ['fals', 'literal'], walked: 9 });
  assert.deepEqual(find('{"k":"v"'), { outcome: 'open', last: ['v', 'string'], walked: 8 });
  for (const text of ['', '  ', '{', '{"', '{"k', '{"k"', '{"k":', '{"k": ', '{"a":1,', '{"a":"k"', '\u00ef\u00bb']) {
    const found = find(Buffer.from(text, text.startsWith('\u00ef') ? 'latin1' : 'utf8'));
    assert.equal(found.outcome, 'open', JSON.stringify(text));
    assert.equal(found.last, undefined, JSON.stringify(text));
    assert.equal(found.open, undefined, JSON.stringify(text));
  }
});

test('not an object, malformed, or not UTF-8 where the walk looked: decided, and nothing more is walked', () => {
  for (const text of ['[{"k":1}]', '"k"', '12', 'true', 'null', '-1', 'NaN', 'Infinity']) assert.equal(find(text).outcome, 'not-object', text);
  for (const [text, walked] of [
    ['x{"k":1}', 1],
    ['{"k" 1}', 6],
    ['{"k":,}', 6],
    ['{,"k":1}', 2],
    ['{"k":1,,"x":1}', 8],
    ['{"k":1,}', 8],
    ['{"a":1]}', 7],
    ['{"k":@}', 6],
    ['{"a":1} {', 7],
  ] as const) {
    const found = find(text);
    assert.equal(found.outcome, text.endsWith(' {') ? 'closed' : 'malformed', text);
    assert.equal(found.walked, walked, `${text}: walked up to where it was decided`);
  }
  // A UTF-8 byte order mark is skipped (Python's json reads the body after it); one cut short is no JSON.
  assert.deepEqual(find(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(' {"k":1}')])).last, ['1', 'literal']);
  assert.equal(find(Buffer.from([0xef, 0xbb, 0x7b])).outcome, 'malformed');
  assert.equal(find(Buffer.concat([Buffer.from(' '), Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')])).outcome, 'malformed', 'a mark after a space');
  // Python's json reads a body with a zero in its first two bytes, or a UTF-16/32 mark, as UTF-16 or UTF-32.
  for (const encoded of [
    Buffer.from('{"k":1}', 'utf16le'),
    Buffer.from('{"k":1}', 'utf16le').swap16(),
    Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"k":1}', 'utf16le')]),
    Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('{"k":1}', 'utf16le').swap16()]),
    Buffer.from([0, 0, 0, 0x7b]),
    Buffer.from([0x20, 0, 0, 0]),
  ]) {
    assert.equal(find(encoded).outcome, 'foreign', encoded.toString('hex'));
    assert.equal(find(encoded, 'k', [1]).outcome, 'foreign', `${encoded.toString('hex')} in pieces`);
  }
});

test('in pieces cut anywhere, or a byte at a time: the same as one walk of the whole, each byte once', () => {
  const text = ' {"a":{"k":"x"},"s":"\\"k\\":\\\\","k" : "v\\"1", "n":[1,{"k":2}] ,"\\u006b":  -12.5e3 , "z":"caf\u00e9"}';
  const whole = find(text);
  assert.deepEqual(whole.last, ['-12.5e3', 'literal']);
  const length = Buffer.byteLength(text);
  for (let cut = 1; cut < length; cut++) assert.deepEqual(find(text, 'k', [cut]), whole, `cut at ${cut}`);
  const walk = new TopLevelWalk(['k'], [64]);
  const body = Buffer.from(text);
  for (let i = 0; i < body.length; i++) {
    walk.feed(body.subarray(i, i + 1));
    assert.equal(walk.walked, walk.outcome === 'open' ? i + 1 : whole.walked, `after ${i + 1} bytes`);
  }
  assert.equal(walk.outcome, 'closed');
  assert.equal(Buffer.from(walk.values[0]!.bytes).toString(), '-12.5e3');
});

test('at most `max` bytes are walked, across calls', () => {
  const text = '{"pad":"xxxxxxxxxx","k":1}';
  assert.deepEqual(find(text, 'k', [], 19), { outcome: 'open', walked: 19 });
  assert.deepEqual(find(text, 'k', [5, 12], 24), { outcome: 'open', walked: 24 });
  assert.deepEqual(find(text, 'k', [5, 12], 25), { outcome: 'open', open: ['1', 'literal'], walked: 25 });
  assert.deepEqual(find(text, 'k', [], 26).last, ['1', 'literal']);
  const walk = new TopLevelWalk(['k'], [8]);
  const body = Buffer.from(text);
  walk.walkPieces([body.subarray(0, 10)], 12);
  walk.walkPieces([body.subarray(0, 10), body.subarray(10)], 12);
  assert.equal(walk.walked, 12);
});

// Generated documents: what the walk keeps of each tracked key is what JSON.parse finds (the last
// value of the key, its escapes decoded), with keys written with random escapes and the body fed
// in random pieces.
let seed = 7;
function random(): number {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
}
function pick<T>(list: readonly T[]): T {
  return list[Math.floor(random() * list.length)]!;
}
const KEYS = ['model', 'max_tokens', 'stream'];
const WORDS = ['', 'model', '"max_tokens": 5', 'a\\b', 'quote " here', '\\', '{[', ']}', 'caf\u00e9 \u2603', '\n'];

function value(depth: number): string {
  const r = random();
  if (depth > 2 || r < 0.4) return pick(['true', 'false', 'null', '0', '-1.5e3', '900', '9e2', JSON.stringify(pick(WORDS))]);
  if (r < 0.7) return `[${Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1)).join(',')}]`;
  return object(depth + 1);
}

/** A key as written: each character escaped as \uXXXX at random. */
function written(key: string): string {
  let out = '"';
  for (const c of key) out += random() < 0.2 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : JSON.stringify(c).slice(1, -1);
  return `${out}"`;
}

function object(depth: number): string {
  const n = Math.floor(random() * 6);
  const members = Array.from({ length: n }, () => `${written(pick([...KEYS, 'x', 'models', pick(WORDS)]))}${pick([':', ' : '])}${value(depth)}`);
  return `{${members.join(pick([',', ', ', ',\n']))}}`;
}

test('generated documents: each tracked key keeps the value JSON.parse finds, in any pieces', () => {
  const seen = { found: 0, absent: 0 };
  for (let round = 0; round < 3000; round++) {
    const text = object(0);
    const body = Buffer.from(text);
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const walk = new TopLevelWalk(KEYS, [256, 256, 256]);
    for (let at = 0; at < body.length; ) {
      const next = Math.min(body.length, at + 1 + Math.floor(random() * 16));
      walk.feed(body.subarray(at, next));
      at = next;
    }
    assert.equal(walk.outcome, 'closed', text);
    KEYS.forEach((key, k) => {
      const v = walk.values[k]!;
      if (!(key in parsed)) {
        seen.absent++;
        assert.equal(v.count, 0, `${text}: ${key}`);
        return;
      }
      seen.found++;
      const want = parsed[key];
      if (v.kind === 'nested') assert.ok(typeof want === 'object' && want !== null, `${text}: ${key}`);
      else {
        const kept = Buffer.from(v.bytes).toString();
        assert.deepEqual(JSON.parse(v.kind === 'string' ? `"${kept}"` : kept), want, `${text}: ${key}`);
      }
    });
  }
  assert.ok(seen.found > 1000 && seen.absent > 1000, JSON.stringify(seen));
});

test('strings long and short, with runs of backslashes before quotes, cut at every byte: read as JSON.parse reads them', () => {
  const contents = ['', 'a', '\\', '\\\\', '"', '\\"', 'x'.repeat(30), `${'y'.repeat(40)}"${'z'.repeat(40)}`, `${'\\'.repeat(5)}"`, `${'w'.repeat(25)}\\${'\\'.repeat(3)}`, 'end\\\\\\"'];
  for (const content of contents) {
    const text = JSON.stringify({ a: content, n: [content, { k: content }], k: content, z: 1 });
    const body = Buffer.from(text);
    for (let cut = 1; cut < body.length; cut++) {
      const walk = new TopLevelWalk(['k', 'z'], [256, 8]);
      walk.feed(body.subarray(0, cut));
      walk.feed(body.subarray(cut));
      assert.equal(walk.outcome, 'closed', `${text} cut at ${cut}`);
      assert.equal(JSON.parse(`"${Buffer.from(walk.values[0]!.bytes).toString()}"`), content, `${text} cut at ${cut}`);
      assert.equal(Buffer.from(walk.values[1]!.bytes).toString(), '1', `${text} cut at ${cut}`);
    }
  }
});
