// The event scanner (src/relay/answer/sse-events.ts) against a reference written straight from the
// WHATWG rules over whole strings: for every stream, every way of cutting it into two or three
// reads, byte by byte, and random cuts, the events counted after each read are the events the
// reference finds in the bytes so far. Streams mix LF, CRLF and lone CR, comments, multi-line
// data, fields that only look like `data`, byte order marks and non-ASCII bytes. `[DONE]` events
// are counted apart as well, however they are cut.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventScanner, isEventStream } from '../../src/relay/answer/sse-events.js';
import { referenceEventCount } from '../helpers/sse-reference.js';

/** Scans `bytes` cut at `cuts` (ascending offsets); checks the count after every read. */
function check(bytes: Buffer, cuts: number[], what: string): void {
  const scanner = new EventScanner();
  let total = 0;
  let from = 0;
  for (const to of [...cuts, bytes.length]) {
    total += scanner.scan(bytes.subarray(from, to));
    assert.equal(total, referenceEventCount(bytes.subarray(0, to).toString('latin1')), `${what}: ${JSON.stringify(bytes.toString('latin1'))} cut at ${JSON.stringify(cuts)}, after ${to} bytes`);
    from = to;
  }
}

let seed = 12345;
function random(): number {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
}
function pick<T>(list: readonly T[]): T {
  return list[Math.floor(random() * list.length)]!;
}

const LINES = [
  'data: {"token":"hi"}',
  'data:x',
  'data',
  'data:',
  'data: two\nlines',
  'dat',
  'datum: 1',
  'DATA: no',
  ' data: no',
  'datadata: no',
  'data x',
  'data :x',
  ': a comment',
  ':',
  'event: message',
  'id: 7',
  'retry: 1000',
  'caf\u00e9: \u00e9',
  '\u2603',
  '',
];
const ENDINGS = ['\n', '\r\n', '\r'];

function randomStream(): Buffer {
  let text = random() < 0.1 ? '\ufeff' : '';
  const lines = 1 + Math.floor(random() * 8);
  for (let i = 0; i < lines; i++) {
    const line = pick(LINES).replace('\n', pick(ENDINGS));
    text += line + pick(ENDINGS);
    if (random() < 0.4) text += pick(ENDINGS);
  }
  if (random() < 0.3) text += pick(['data: cut sh', 'data', '\r']);
  return Buffer.from(text, 'utf8');
}

const FIXED: [string, string, number][] = [
  ['LF events', 'data: a\n\ndata: b\n\n', 2],
  ['CRLF events', 'data: a\r\n\r\ndata: b\r\n\r\n', 2],
  ['lone CR events', 'data: a\r\rdata: b\r\r', 2],
  ['mixed endings', 'data: a\r\n\ndata: b\n\r\ndata: c\r\r\n', 3],
  ['multi-line data is one event', 'data: a\ndata: b\ndata: c\n\n', 1],
  ['comments are not events', ': ping\n\n: ping\r\n\r\n', 0],
  ['a comment inside an event', 'data: a\n: note\ndata: b\n\n', 1],
  ['event, id and retry alone are not events', 'event: x\n\nid: 1\n\nretry: 5\n\n', 0],
  ['a named event with data', 'event: delta\ndata: {}\nid: 3\n\n', 1],
  ['a line that is exactly data', 'data\n\n', 1],
  ['fields that look like data', 'dat\n\ndatum: 1\n\nDATA: x\n\n data: x\n\n', 0],
  ['blank lines at the start', '\n\n\r\n\rdata: a\n\n', 1],
  ['a byte order mark', '\ufeffdata: a\n\n', 1],
  ['an event cut short', 'data: a\n\ndata: b\n', 1],
  ['CRLF then an empty line', 'data: a\r\n\r\n', 1],
  ['CR CR LF: two endings then LF ends the third line', 'data: a\r\r\n', 1],
];

test('fixed streams: the count is the reference count, whole and cut at every byte', () => {
  for (const [name, text, expected] of FIXED) {
    const bytes = Buffer.from(text, 'utf8');
    assert.equal(referenceEventCount(bytes.toString('latin1')), expected, `the reference agrees with the case: ${name}`);
    check(bytes, [], name);
    for (let a = 0; a <= bytes.length; a++) {
      for (let b = a; b <= bytes.length; b++) check(bytes, [a, b], name);
    }
    check(bytes, Array.from({ length: bytes.length }, (_, i) => i), `${name}, byte by byte`);
  }
});

test('random streams: every two-way cut, byte by byte, and random cuts agree with the reference', () => {
  for (let round = 0; round < 3000; round++) {
    const bytes = randomStream();
    check(bytes, [], 'whole');
    for (let a = 0; a <= bytes.length; a++) check(bytes, [a], 'one cut');
    check(bytes, Array.from({ length: bytes.length }, (_, i) => i), 'byte by byte');
    const cuts = new Set<number>();
    const many = Math.floor(random() * 6);
    for (let i = 0; i < many; i++) cuts.add(Math.floor(random() * (bytes.length + 1)));
    check(bytes, [...cuts].sort((x, y) => x - y), 'random cuts');
  }
});

test('an empty read changes nothing, not even a pending CR', () => {
  const scanner = new EventScanner();
  assert.equal(scanner.scan(Buffer.from('data: a\r\r')), 1);
  assert.equal(scanner.scan(Buffer.alloc(0)), 0);
  // The LF belongs to the CR that ended the last read: not a blank line of its own.
  assert.equal(scanner.scan(Buffer.from('\ndata: b\r')), 0);
  assert.equal(scanner.scan(Buffer.alloc(0)), 0);
  assert.equal(scanner.scan(Buffer.from('\n\n')), 1);
});

test('a stream of many events in one read, and a read of a large event', () => {
  const events = 'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'.repeat(1000);
  assert.equal(new EventScanner().scan(Buffer.from(events)), 1000);
  const big = `data: ${'y'.repeat(256 * 1024)}\n\n`;
  const scanner = new EventScanner();
  let n = 0;
  for (let i = 0; i < big.length; i += 1000) n += scanner.scan(Buffer.from(big.slice(i, i + 1000)));
  assert.equal(n, 1);
});

test('isEventStream: the media type, any case, with or without parameters', () => {
  for (const yes of ['text/event-stream', 'TEXT/Event-Stream', 'text/event-stream; charset=utf-8', 'text/event-stream;charset=utf-8', 'text/event-stream ;x=1']) {
    assert.equal(isEventStream(yes), true, yes);
  }
  for (const no of [undefined, '', 'text/event-streams', 'text/event-stream2', 'application/json', 'text/event', 'x-text/event-stream']) {
    assert.equal(isEventStream(no), false, String(no));
  }
});

/**
 * `bytes` as a Buffer whose searches (`indexOf`, which the scanner uses to skip to the next line
 * ending) add the bytes they pass to `searched`: the work of a scan, counted, not timed.
 */
function counted(bytes: Buffer): { buf: Buffer; searched(): number } {
  const buf = Buffer.from(bytes);
  const native = Buffer.prototype.indexOf;
  let searched = 0;
  Object.defineProperty(buf, 'indexOf', {
    value(this: Buffer, value: number, from = 0): number {
      const at = native.call(this, value, from);
      searched += (at < 0 ? this.length : at + 1) - from;
      return at;
    },
  });
  return { buf, searched: () => searched };
}

test('the work of a scan is linear whatever the line endings: lone CR costs no more than LF', () => {
  // A 64 KiB read of token events (the size of one socket read), with each kind of line ending.
  const event = (ending: string): string => `data: {"choices":[{"delta":{"content":"tok"}}]}${ending}${ending}`;
  const counts: Record<string, number> = {};
  for (const [name, ending] of [['LF', '\n'], ['CRLF', '\r\n'], ['CR', '\r']] as const) {
    const text = event(ending).repeat(Math.floor((64 * 1024) / event(ending).length));
    const { buf, searched } = counted(Buffer.from(text));
    assert.equal(new EventScanner().scan(buf), Math.floor((64 * 1024) / event(ending).length), name);
    counts[name] = searched();
    // One search for each kind of line ending passes each byte at most once.
    assert.ok(searched() <= 2 * buf.length, `${name}: ${searched()} bytes searched in a read of ${buf.length}`);
  }
  assert.ok(counts['CR']! <= 3 * counts['LF']!, `CR ${counts['CR']} vs LF ${counts['LF']} bytes searched`);
});

test('[DONE] events are events, counted apart as well, whole and cut at every byte', () => {
  const cases: [string, number, number][] = [
    ['data: {"a":1}\n\ndata: [DONE]\n\n', 2, 1],
    ['data:[DONE]\r\n\r\n', 1, 1],
    ['data: [DONE] \n\n', 1, 0],
    ['data:  [DONE]\n\n', 1, 0],
    ['data: [DONE]x\n\n', 1, 0],
    ['data: [DON\n\n', 1, 0],
    ['event: end\ndata: [DONE]\r\r', 1, 1],
    [': [DONE]\n\ndata: x\n\n', 1, 0],
    ['data: [DONE]\n', 0, 0],
  ];
  for (const [text, events, done] of cases) {
    const bytes = Buffer.from(text);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const scanner = new EventScanner();
      const total = scanner.scan(bytes.subarray(0, cut)) + scanner.scan(bytes.subarray(cut));
      assert.equal(total, events, `${JSON.stringify(text)} cut at ${cut}`);
      assert.equal(scanner.done, done, `${JSON.stringify(text)} cut at ${cut}: done`);
    }
  }
});
