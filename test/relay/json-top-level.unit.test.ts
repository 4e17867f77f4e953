// The walk over a JSON body's top-level object for one key (src/relay/json-top-level.ts): only a
// top-level key counts (not one inside a nested value or a string), escaped quotes, a key that
// occurs twice, a body cut short, a body in pieces (each byte walked once), the byte limit, and
// what is not an object or is malformed. stream-request.unit.test.ts and body-model.unit.test.ts
// check the two walks built on it against JSON.parse.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bytesOf, type Outcome, TopLevelWalk, type ValueKind } from '../../src/relay/json-top-level.js';

interface Found {
  outcome: Outcome;
  /** The key's last whole value, as text, and its kind. */
  last?: [string, ValueKind];
  /** The key's value the bytes ran out in: its text so far, and its kind. */
  open?: [string, ValueKind];
  walked: number;
}

/** One walk of `text` for `key`, cut into pieces at `cuts`, up to `max` bytes. */
function find(text: string, key = 'k', cuts: number[] = [], max = Infinity): Found {
  const body = Buffer.from(text);
  const ends = [...cuts, body.length];
  const pieces = ends.map((end, i) => body.subarray(i === 0 ? 0 : ends[i - 1]!, end));
  const walk = new TopLevelWalk(key);
  walk.walkPieces(pieces, max);
  const found: Found = { outcome: walk.outcome, walked: walk.walked };
  if (walk.lastStart >= 0) found.last = [bytesOf(pieces, walk.lastStart, walk.lastEnd).toString(), walk.lastKind];
  if (walk.openStart >= 0 && walk.outcome === 'open') found.open = [bytesOf(pieces, walk.openStart, walk.walked).toString(), walk.openKind];
  return found;
}

test("the key's value at the top level: a string, a nested value or a literal, spaces around it", () => {
  assert.deepEqual(find('{"k":"v"}'), { outcome: 'closed', last: ['"v"', 'string'], walked: 9 });
  assert.deepEqual(find(' \r\n{ "a" : 1 ,\t"k" :\n{"x":[1,"}"]} } trailing'), { outcome: 'closed', last: ['{"x":[1,"}"]}', 'nested'], walked: 36 });
  assert.deepEqual(find('{"k":[1,[2]],"z":0}').last, ['[1,[2]]', 'nested']);
  for (const literal of ['true', 'false', 'null', '-1.5e3', '0']) {
    assert.deepEqual(find(`{"k":${literal}}`).last, [literal, 'literal'], literal);
    assert.deepEqual(find(`{"k":${literal} ,"z":1}`).last, [literal, 'literal'], `${literal}, then a space`);
  }
  assert.deepEqual(find('{}'), { outcome: 'closed', walked: 2 });
  assert.deepEqual(find('{"a":1}'), { outcome: 'closed', walked: 7 });
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

test('escaped quotes and backslashes: in values and in keys', () => {
  assert.deepEqual(find('{"k":"a\\"b\\\\"}').last, ['"a\\"b\\\\"', 'string']);
  assert.deepEqual(find('{"a\\\\":"k","k":"v"}').last, ['"v"', 'string'], 'a key ending with an escaped backslash');
  assert.deepEqual(find('{"a\\"k":1,"k":2}').last, ['2', 'literal'], 'an escaped quote inside a key');
  // The key must be spelled as given: an escape makes it another key, as does a longer or shorter name.
  for (const text of ['{"\\u006b":1}', '{"kk":1}', '{"":1}', '{"k\\"":1}']) assert.equal(find(text).last, undefined, text);
  assert.deepEqual(find('{"model":1,"models":2,"mode":3}', 'model').last, ['1', 'literal']);
});

test('a key that occurs twice counts with its last value', () => {
  assert.deepEqual(find('{"k":"first","x":0,"k":{"second":1}}').last, ['{"second":1}', 'nested']);
  assert.deepEqual(find('{"k":true,"k":false}').last, ['false', 'literal']);
  // Cut short in the second value: the first is the last whole one, the second is open.
  assert.deepEqual(find('{"k":true,"k":"sec'), { outcome: 'open', last: ['true', 'literal'], open: ['"sec', 'string'], walked: 18 });
});

test('a body cut short: open, with the value it stopped in', () => {
  assert.deepEqual(find('{"k":"ab'), { outcome: 'open', open: ['"ab', 'string'], walked: 8 });
  assert.deepEqual(find('{"k":[1,{"a":"]'), { outcome: 'open', open: ['[1,{"a":"]', 'nested'], walked: 15 });
  assert.deepEqual(find('{"k":fals'), { outcome: 'open', open: ['fals', 'literal'], walked: 9 });
  assert.deepEqual(find('{"k":"v"'), { outcome: 'open', last: ['"v"', 'string'], walked: 8 });
  for (const text of ['', '  ', '{', '{"', '{"k', '{"k"', '{"k":', '{"k": ', '{"a":1,', '{"a":"k"']) {
    const found = find(text);
    assert.equal(found.outcome, 'open', JSON.stringify(text));
    assert.equal(found.last, undefined, JSON.stringify(text));
    assert.equal(found.open, undefined, JSON.stringify(text));
    assert.equal(found.walked, Buffer.byteLength(text), JSON.stringify(text));
  }
});

test('not an object, or malformed where the walk looked: decided, and nothing more is walked', () => {
  for (const text of ['[{"k":1}]', '"k"', '12', 'true', 'null', '-1']) assert.equal(find(text).outcome, 'not-object', text);
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
});

test('in pieces cut anywhere, or a byte at a time: the same as one walk of the whole, each byte once', () => {
  const text = ' {"a":{"k":"x"},"s":"\\"k\\":\\\\","k" : "v\\"1", "n":[1,{"k":2}] ,"k":  -12.5e3 , "z":"caf\u00e9"}';
  const whole = find(text);
  assert.deepEqual(whole.last, ['-12.5e3', 'literal']);
  const length = Buffer.byteLength(text);
  for (let cut = 1; cut < length; cut++) assert.deepEqual(find(text, 'k', [cut]), whole, `cut at ${cut}`);
  const walk = new TopLevelWalk('k');
  const body = Buffer.from(text);
  const pieces: Buffer[] = [];
  for (let i = 0; i < body.length; i++) {
    pieces.push(body.subarray(i, i + 1));
    walk.walkPieces(pieces, Infinity);
    assert.equal(walk.walked, walk.outcome === 'open' ? i + 1 : whole.walked, `after ${i + 1} bytes`);
    // A second call with nothing new walks nothing.
    walk.walkPieces(pieces, Infinity);
    assert.equal(walk.walked, walk.outcome === 'open' ? i + 1 : whole.walked);
  }
  assert.equal(walk.outcome, 'closed');
  assert.deepEqual(bytesOf(pieces, walk.lastStart, walk.lastEnd).toString(), '-12.5e3');
});

test('at most `max` bytes are walked, across calls', () => {
  const text = '{"pad":"xxxxxxxxxx","k":1}';
  assert.deepEqual(find(text, 'k', [], 19), { outcome: 'open', walked: 19 });
  assert.deepEqual(find(text, 'k', [5, 12], 24), { outcome: 'open', walked: 24 });
  assert.deepEqual(find(text, 'k', [5, 12], 25), { outcome: 'open', open: ['1', 'literal'], walked: 25 });
  assert.deepEqual(find(text, 'k', [], 26).last, ['1', 'literal']);
  const walk = new TopLevelWalk('k');
  const body = Buffer.from(text);
  walk.walkPieces([body.subarray(0, 10)], 12);
  walk.walkPieces([body.subarray(0, 10), body.subarray(10)], 12);
  assert.equal(walk.walked, 12);
});

test('bytesOf: a span across pieces', () => {
  const pieces = [Buffer.from('abc'), Buffer.from(''), Buffer.from('def'), Buffer.from('g')];
  assert.equal(bytesOf(pieces, 0, 7).toString(), 'abcdefg');
  assert.equal(bytesOf(pieces, 2, 5).toString(), 'cde');
  assert.equal(bytesOf(pieces, 3, 6).toString(), 'def');
  assert.equal(bytesOf(pieces, 4, 4).toString(), '');
});
