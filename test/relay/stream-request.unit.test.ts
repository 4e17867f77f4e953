// Whether a request asks for a streamed answer (src/relay/body/stream-request.ts): the Accept header,
// and a walk over the body's top-level object checked against JSON.parse (and pydantic's reading of
// a boolean: `true`, 1, "yes", ...; null is false) on generated documents
// (nested objects and arrays, strings full of quotes, backslashes and the word "stream", the key
// at any position, any value), on every prefix of them (undecided or already right), fed in pieces
// to one walk that resumes where it stopped (each byte walked once), and on malformed bodies.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acceptsEventStream, StreamFlag, type StreamSaid } from '../../src/relay/body/stream-request.js';
import { STREAM_FLAG_MAX_SCAN as MAX_SCAN } from '../../src/tunables.js';

/** One look at `body`, all of what is held, by a new walk. */
function said(body: Buffer, final: boolean): StreamSaid | undefined {
  return new StreamFlag().look([body], final);
}

/** What JSON.parse makes of the body's top-level `stream`, read as pydantic reads a boolean. */
function parsed(text: string): StreamSaid {
  const value = (JSON.parse(text) as { stream?: unknown }).stream;
  if (value === true || value === 1 || (typeof value === 'string' && ['1', 't', 'y', 'on', 'yes', 'true'].includes(value.toLowerCase()))) return 'true';
  if (value === false || value === 0 || value === null || (typeof value === 'string' && ['0', 'f', 'n', 'no', 'off', 'false'].includes(value.toLowerCase()))) return 'false';
  return 'unsaid';
}

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

test('generated bodies: the answer is what JSON.parse finds, and every prefix is undecided or already right', () => {
  const seen: Record<StreamSaid, number> = { true: 0, false: 0, unsaid: 0 };
  for (let round = 0; round < 4000; round++) {
    const doc = randomObject(0, true);
    const text = spaced(JSON.stringify(doc));
    const body = Buffer.from(text);
    const expected = parsed(text);
    seen[expected]++;
    assert.equal(said(body, true), expected, text);
    assert.equal(said(body, false), expected, `${text} (more could come, but the object is complete)`);
    for (let n = 0; n < body.length; n++) {
      const answer = said(body.subarray(0, n), false);
      assert.ok(answer === undefined || answer === expected, `prefix ${JSON.stringify(body.subarray(0, n).toString())} of ${text}: ${String(answer)}`);
      if (answer === undefined) assert.equal(said(body.subarray(0, n), true), 'unsaid', 'a body cut short is decided when nothing more comes');
    }
  }
  assert.ok(seen.true > 300 && seen.false > 100, `enough bodies say each: ${JSON.stringify(seen)}`);
});

test('generated bodies in pieces: one walk, looked at after every piece, resumes where it stopped and agrees with a whole look', () => {
  for (let round = 0; round < 2000; round++) {
    const text = spaced(JSON.stringify(randomObject(0, true)));
    const body = Buffer.from(text);
    const expected = parsed(text);
    const flag = new StreamFlag();
    const chunks: Buffer[] = [];
    let at = 0;
    let answer: StreamSaid | undefined;
    while (at < body.length) {
      const next = Math.min(body.length, at + 1 + Math.floor(random() * 12));
      chunks.push(body.subarray(at, next));
      at = next;
      // Looked at twice per piece: the second look has nothing new to walk.
      answer = flag.look(chunks, false);
      const walked = flag.walked;
      assert.equal(flag.look(chunks, false), answer, text);
      assert.equal(flag.walked, walked, `${text}: nothing walked again`);
      assert.ok(answer === undefined || answer === expected, `${text} after ${at} bytes: ${String(answer)}`);
      if (answer !== undefined) break;
    }
    assert.equal(answer ?? flag.look(chunks, true), expected, text);
    assert.ok(flag.walked <= body.length, `${text}: walked ${flag.walked} of ${body.length} bytes`);
  }
});

test('fixed bodies', () => {
  const cases: [string, StreamSaid][] = [
    ['{"model":"m","stream":true}', 'true'],
    ['{"stream":true,"messages":[{"role":"user","content":"hi"}]}', 'true'],
    [' \r\n{ "stream" : true } ', 'true'],
    ['{"stream":false}', 'false'],
    ['{"model":"m","stream" : false ,"n":1}', 'false'],
    ['{"stream":"true"}', 'true'],
    ['{"stream":"YES"}', 'true'],
    ['{"stream":"false"}', 'false'],
    ['{"stream":"off"}', 'false'],
    ['{"stream":" true"}', 'unsaid'],
    ['{"stream":"maybe"}', 'unsaid'],
    ['{"stream":1}', 'true'],
    ['{"stream":1.0}', 'true'],
    ['{"stream":0}', 'false'],
    ['{"stream":2}', 'unsaid'],
    ['{"stream":null}', 'false'],
    ['{"stream":{"a":1}}', 'unsaid'],
    ['{"stream":trueish}', 'unsaid'],
    ['{"stream":falsey}', 'unsaid'],
    ['{"options":{"stream":true}}', 'unsaid'],
    ['{"options":{"stream":false}}', 'unsaid'],
    ['[{"stream":true}]', 'unsaid'],
    ['{"content":"\\"stream\\": true"}', 'unsaid'],
    ['{"a\\\\":"stream","stream":true}', 'true'],
    ['{"str\\u0065am":true}', 'true'],
    ['{"\\u0073tream":false}', 'false'],
    ['{"streams":true}', 'unsaid'],
    ['{"strea":true}', 'unsaid'],
    ['{"stream":true,"stream":false}', 'false'],
    ['{"stream":false,"stream":true}', 'true'],
    ['{}', 'unsaid'],
    ['', 'unsaid'],
    ['not json "stream": true', 'unsaid'],
    ['{"stream" true}', 'unsaid'],
    ['{"stream":,}', 'unsaid'],
    ['{,"stream":true}', 'unsaid'],
    ['{"stream":true,,"x":1}', 'unsaid'],
    ['{"stream":false,}', 'unsaid'],
  ];
  for (const [text, expected] of cases) assert.equal(said(Buffer.from(text), true), expected, text);
  assert.equal(said(Buffer.from('{"model":"m","messages":[]'), false), undefined, 'no key yet, more to come');
  assert.equal(said(Buffer.from('{"model":"m","stream":true'), false), 'true', 'decided before the object ends');
  assert.equal(said(Buffer.from('{"model":"m","stream":false'), false), 'false', 'decided before the object ends');
  assert.equal(said(Buffer.from('{"model":"m","stream":fals'), false), undefined, 'a literal cut short: more to come');
  assert.equal(said(Buffer.from('{"model":"m"'), false), undefined, 'the key may still come');
});

test('a body held in pieces, looked at at every tick while it arrives and while it stalls, is walked once', () => {
  // A 60 KB chat body, its upload stalled before its end: the first look walks what is there,
  // every later look only what arrived since, and a stalled body nothing at all.
  const text = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(60_000) }], stream: true });
  const body = Buffer.from(text);
  const flag = new StreamFlag();
  const chunks: Buffer[] = [];
  let walkedInAll = 0;
  let last = 0;
  const look = (final: boolean): StreamSaid | undefined => {
    const answer = flag.look(chunks, final);
    walkedInAll += flag.walked - last;
    last = flag.walked;
    return answer;
  };
  const stallAt = body.length - 20;
  for (let at = 0; at < stallAt; at += 4096) {
    chunks.push(body.subarray(at, Math.min(stallAt, at + 4096)));
    assert.equal(look(false), undefined);
  }
  for (let tick = 0; tick < 10; tick++) assert.equal(look(false), undefined, 'stalled: still undecided');
  assert.equal(flag.walked, stallAt, 'every byte held so far walked, once');
  chunks.push(body.subarray(stallAt));
  assert.equal(look(true), 'true');
  assert.equal(walkedInAll, body.length, 'the whole body walked once in all');
});

test('only the first MAX_SCAN bytes are walked: a key after them is not found, and nothing waits for more', () => {
  const filler = 'x'.repeat(MAX_SCAN);
  assert.equal(said(Buffer.from(`{"stream":true,"pad":"${filler}"}`), true), 'true');
  assert.equal(said(Buffer.from(`{"stream":false,"pad":"${filler}"}`), true), 'false');
  assert.equal(said(Buffer.from(`{"pad":"${filler}","stream":true}`), true), 'unsaid');
  assert.equal(said(Buffer.from(`{"pad":"${filler}","stream":true`), false), 'unsaid');
  // Held in pieces and still arriving: decided once MAX_SCAN bytes are walked, never more walked.
  const flag = new StreamFlag();
  const pieces = [Buffer.from('{"pad":"'), ...Array.from({ length: 5 }, () => Buffer.from(filler.slice(0, MAX_SCAN / 2))), Buffer.from('","stream":true}')];
  assert.equal(flag.look(pieces, false), 'unsaid');
  assert.equal(flag.walked, MAX_SCAN);
  // Bodies made to be slow to walk are walked once, up to MAX_SCAN bytes: counted, not timed.
  for (const [what, body] of [
    ['[', `{"stream":false,"x":${'['.repeat(MAX_SCAN)}`],
    ['\\"', `{"stream":false,"x":"${'\\"'.repeat(MAX_SCAN / 2)}`],
    ['tiny strings', `{"stream":false,"x":[${'"",'.repeat(MAX_SCAN / 3)}`],
  ] as const) {
    const slow = new StreamFlag();
    assert.equal(slow.look([Buffer.from(body)], true), 'false', what);
    assert.ok(slow.walked <= MAX_SCAN, `${what}: ${slow.walked} bytes walked for a scan limit of ${MAX_SCAN}`);
    assert.equal(slow.look([Buffer.from(body)], true), 'false', what);
  }
  // A large whole body without the key (spelled out, or a \u escape that could spell it) is decided without a walk.
  const plain = new StreamFlag();
  assert.equal(plain.look([Buffer.from(`{"pad":"${filler}${filler}"}`)], true), 'unsaid');
  assert.equal(plain.walked, 0);
  const escaped = new StreamFlag();
  assert.equal(escaped.look([Buffer.from(`{"\\u0073tream":true,"pad":"${filler}"}`)], true), 'true');
});

test('a malformed body says nothing, whatever came before: a value that starts as no JSON value does', () => {
  for (const text of ['{"stream":true,"x":@}', '{"stream":false,"x":#1}']) {
    assert.equal(said(Buffer.from(text), true), 'unsaid', text);
    assert.equal(said(Buffer.from(text), false), 'unsaid', `${text} (more could come)`);
  }
});
