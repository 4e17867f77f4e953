// Whether a request asks for a streamed answer (src/relay/stream-request.ts): the Accept header,
// and a walk over the body's top-level object checked against JSON.parse on generated documents
// (nested objects and arrays, strings full of quotes, backslashes and the word "stream", the key
// at any position, any value), on every prefix of them (undecided or already right), and on
// malformed bodies.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acceptsEventStream, asksForStream } from '../src/relay/stream-request.js';
import { STREAM_FLAG_MAX_SCAN as MAX_SCAN } from '../src/tunables.js';

test('Accept: text/event-stream named, in any case and with parameters; not by wildcards, not with q=0', () => {
  for (const yes of ['text/event-stream', 'application/json, text/event-stream', 'TEXT/EVENT-STREAM', ' text/event-stream ; charset=utf-8', 'text/event-stream;q=0.5', 'text/event-stream; q=1']) {
    assert.equal(acceptsEventStream(yes), true, yes);
  }
  for (const no of [undefined, '', '*/*', 'text/*', 'application/json', 'text/event-stream;q=0', 'text/event-stream; q=0.0', 'text/event-streams']) {
    assert.equal(acceptsEventStream(no), false, String(no));
  }
});

let seed = 99;
function random(): number {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
}
function pick<T>(list: readonly T[]): T {
  return list[Math.floor(random() * list.length)]!;
}

const STRINGS = ['', 'stream', '"stream": true', 'a\\b', 'quote " inside', 'ends with backslash \\', '\\"stream\\":true', 'caf\u00e9 \u2603', '{[', ']}', '\n\t'];

function randomValue(depth: number): unknown {
  const r = random();
  if (depth > 2 || r < 0.35) return pick<unknown>([true, false, null, 0, -1.5e3, 42, pick(STRINGS)]);
  if (r < 0.65) return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(depth + 1));
  return randomObject(depth + 1, false);
}

function randomObject(depth: number, top: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const keys = Math.floor(random() * 5);
  for (let i = 0; i < keys; i++) out[pick(['model', 'messages', 'stream', 'streaming', 'max_tokens', 'x', pick(STRINGS)])] = randomValue(depth);
  if (top && random() < 0.5) {
    // The key at a random position, with a likely value.
    const entries = Object.entries(out).filter(([k]) => k !== 'stream');
    entries.splice(Math.floor(random() * (entries.length + 1)), 0, ['stream', pick<unknown>([true, true, false, 'true', 1, null, { stream: true }])]);
    return Object.fromEntries(entries);
  }
  return out;
}

/** JSON text with random whitespace between tokens (outside strings). */
function spaced(text: string): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    out += c;
    if (c === '"') inString = !inString;
    else if (c === '\\' && inString) {
      out += text[++i]!;
      continue;
    }
    if (!inString && ',:{}[]'.includes(c) && random() < 0.3) out += pick([' ', '\n', '\r\n', '\t  ']);
  }
  return out;
}

test('generated bodies: the answer is JSON.parse(body).stream === true, and every prefix is undecided or already right', () => {
  let asked = 0;
  for (let round = 0; round < 4000; round++) {
    const doc = randomObject(0, true);
    const text = spaced(JSON.stringify(doc));
    const body = Buffer.from(text);
    const expected = (JSON.parse(text) as { stream?: unknown }).stream === true;
    if (expected) asked++;
    assert.equal(asksForStream(body, true), expected, text);
    assert.equal(asksForStream(body, false), expected, `${text} (more could come, but the object is complete)`);
    for (let n = 0; n < body.length; n++) {
      const answer = asksForStream(body.subarray(0, n), false);
      assert.ok(answer === undefined || answer === expected, `prefix ${JSON.stringify(body.subarray(0, n).toString())} of ${text}: ${String(answer)}`);
      if (answer === undefined) assert.equal(asksForStream(body.subarray(0, n), true), false, 'a body cut short is decided when nothing more comes');
    }
  }
  assert.ok(asked > 500, `enough bodies ask for a stream: ${asked}`);
});

test('fixed bodies', () => {
  const cases: [string, boolean][] = [
    ['{"model":"m","stream":true}', true],
    ['{"stream":true,"messages":[{"role":"user","content":"hi"}]}', true],
    [' \r\n{ "stream" : true } ', true],
    ['{"stream":false}', false],
    ['{"stream":"true"}', false],
    ['{"stream":1}', false],
    ['{"stream":trueish}', false],
    ['{"options":{"stream":true}}', false],
    ['[{"stream":true}]', false],
    ['{"content":"\\"stream\\": true"}', false],
    ['{"a\\\\":"stream","stream":true}', true],
    ['{"stream":true,"stream":false}', false],
    ['{"stream":false,"stream":true}', true],
    ['{}', false],
    ['', false],
    ['not json "stream": true', false],
    ['{"stream" true}', false],
    ['{"stream":,}', false],
    ['{,"stream":true}', false],
  ];
  for (const [text, expected] of cases) assert.equal(asksForStream(Buffer.from(text), true), expected, text);
  assert.equal(asksForStream(Buffer.from('{"model":"m","messages":[]'), false), undefined, 'no key yet, more to come');
  assert.equal(asksForStream(Buffer.from('{"model":"m","stream":true'), false), true, 'decided before the object ends');
  assert.equal(asksForStream(Buffer.from('{"model":"m"'), false), undefined, 'the key may still come');
});

test('only the first MAX_SCAN bytes are walked: a key after them is not found, and nothing waits for more', () => {
  const filler = 'x'.repeat(MAX_SCAN);
  assert.equal(asksForStream(Buffer.from(`{"stream":true,"pad":"${filler}"}`), true), true);
  assert.equal(asksForStream(Buffer.from(`{"pad":"${filler}","stream":true}`), true), false);
  assert.equal(asksForStream(Buffer.from(`{"pad":"${filler}","stream":true`), false), false);
  // Bodies made to be slow to walk are still walked once: the bytes read are counted, not timed.
  for (const [what, slow] of [
    ['[', `{"stream":false,"x":${'['.repeat(MAX_SCAN / 2)}`],
    ['\\"', `{"stream":false,"x":"${'\\"'.repeat(MAX_SCAN / 2)}`],
    ['tiny strings', `{"stream":false,"x":[${'"",'.repeat(MAX_SCAN / 3)}`],
  ] as const) {
    const { body, reads } = countingReads(Buffer.from(slow));
    assert.equal(asksForStream(body, true), false, what);
    assert.ok(reads() <= 3 * MAX_SCAN, `${what}: ${reads()} bytes read for a scan limit of ${MAX_SCAN}`);
  }
});

/** `buf` behind a proxy that counts the bytes the walk reads: by index, and those `indexOf` passes over. */
function countingReads(buf: Buffer): { body: Buffer; reads: () => number } {
  let reads = 0;
  const body = new Proxy(buf, {
    get(target, key) {
      if (typeof key === 'string') {
        const index = Number(key);
        if (Number.isInteger(index)) {
          reads++;
          return target[index];
        }
      }
      if (key === 'indexOf') {
        return (value: number | Buffer, from = 0): number => {
          const at = target.indexOf(value, from);
          reads += (at < 0 ? target.length : at + 1) - from;
          return at;
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { body, reads: () => reads };
}
