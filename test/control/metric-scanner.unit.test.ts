// The load reader's scanner fed an exposition in chunks, as a socket delivers it: the same samples
// wherever the chunks are cut, every configured name read in one pass, lines over 4 KiB skipped
// (even when they hold the name), and at most 1,000 series per name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type MetricSamples, MetricScanner } from '../../src/control/service/metric-scanner.js';
import { exposition } from '../helpers/load-replica.js';

const NAMES = ['vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc', 'vllm:num_requests_running'];

/** Every name's samples after `chunks` were written in order. */
function scan(chunks: Buffer[], names = NAMES): (MetricSamples | undefined)[] {
  const scanner = new MetricScanner(names);
  for (const c of chunks) scanner.write(c);
  scanner.end();
  return names.map((_, i) => scanner.samples(i));
}

const TEXT = [
  '# HELP vllm:num_requests_running Number of requests in model execution batches.',
  'vllm:num_requests_running{engine="0",model_name="m"} 12.0',
  'vllm:num_requests_running{engine="1",model_name="m"} 9.0',
  'vllm:num_requests_waiting{engine="0",note="has } and \\n and vllm:num_requests_waiting 9"} 3.0',
  'vllm:num_requests_waiting{engine="1"} NaN',
  '  vllm:num_requests_waiting{engine="2"}\t4 1712345678901\r',
  'vllm:num_requests_waiting_by_reason{reason="capacity"} 100',
  'vllm:kv_cache_usage_perc{engine="0"} 0.42 # {trace_id="abc"} 1.0',
  'vllm:kv_cache_usage_perc{engine="1"} 0.93',
  'vllm:kv_cache_usage_perc',
].join('\n');

test('one pass reads every name: waiting, cache usage and running from the same lines', () => {
  assert.deepEqual(scan([Buffer.from(TEXT, 'latin1')]), [
    { sum: 7, max: 4, series: 2, ignored: 1 },
    { sum: 1.35, max: 0.93, series: 2, ignored: 1 },
    { sum: 21, max: 12, series: 2, ignored: 0 },
  ]);
});

test('a body cut into two chunks at every offset, and into single bytes, reads the same as in one', () => {
  const body = Buffer.from(`${TEXT}\n${exposition(5, 0.5)}`, 'latin1');
  const reference = scan([body]);
  assert.equal(reference[0]?.sum, 12, 'the reference reads both expositions');
  for (let cut = 0; cut <= body.length; cut++) {
    assert.deepEqual(scan([body.subarray(0, cut), body.subarray(cut)]), reference, `cut at ${cut}`);
  }
  const bytes: Buffer[] = [];
  for (let i = 0; i < body.length; i++) bytes.push(body.subarray(i, i + 1));
  assert.deepEqual(scan(bytes), reference, 'one byte at a time');
  // Three chunks: every line break may fall at a chunk's first or last byte.
  for (let a = 0; a < body.length; a += 7) {
    for (let b = a; b <= body.length; b += 13) {
      assert.deepEqual(scan([body.subarray(0, a), body.subarray(a, b), body.subarray(b)]), reference, `cuts at ${a} and ${b}`);
    }
  }
});

test('a line over 4 KiB is skipped whole, even when it holds the name and is cut anywhere; 4 KiB exactly is read', () => {
  const name = 'vllm:num_requests_waiting';
  const line = (length: number, value: string): string => {
    const head = `${name}{pad="`;
    const tail = `"} ${value}`;
    return head + 'x'.repeat(length - head.length - tail.length) + tail;
  };
  const long = line(4097, '100');
  const exact = line(4096, '5');
  assert.equal(long.length, 4097);
  assert.equal(exact.length, 4096);
  const text = Buffer.from(`${long}\n${name} 1\n${exact}\n${long}\n${name} 2\n${long}`, 'latin1');
  const want = { sum: 8, max: 5, series: 3, ignored: 0 };
  // The limit counts the bytes before the line feed: a CR ending the exact line makes it one too long.
  assert.equal(scan([Buffer.from(`${exact}\r\n`, 'latin1')], [name])[0], undefined);
  assert.deepEqual(scan([text], [name])[0], want, 'one chunk');
  for (const size of [1, 100, 4095, 4096, 4097, 5000, 8192, 16_384]) {
    const chunks: Buffer[] = [];
    for (let i = 0; i < text.length; i += size) chunks.push(text.subarray(i, i + size));
    assert.deepEqual(scan(chunks, [name])[0], want, `chunks of ${size}`);
  }
  // The over-long line's tail never reads as a line of its own.
  const tail = Buffer.from(`${'y'.repeat(5000)}\n${name} 3\n`, 'latin1');
  assert.deepEqual(scan([tail.subarray(0, 4000), tail.subarray(4000, 4990), tail.subarray(4990)], [name])[0], { sum: 3, max: 3, series: 1, ignored: 0 });
  const trap = Buffer.from(`${'y'.repeat(4500)}\n`.replace(/y{30}\n$/, `\n${name} 7\n`), 'latin1');
  assert.deepEqual(scan([trap.subarray(0, 4200), trap.subarray(4200)], [name])[0]?.sum, 7, 'a short line right after a long one');
});

test('an 8 MiB single line (the name repeated in it) yields nothing, and carries no more than 4 KiB', () => {
  const name = 'vllm:num_requests_waiting';
  const unit = Buffer.from(`${name}{a="b"} 1 `, 'latin1');
  const chunk = Buffer.alloc(64 * 1024);
  for (let i = 0; i < chunk.length; i += unit.length) unit.copy(chunk, i);
  const scanner = new MetricScanner([name]);
  for (let sent = 0; sent < 8 * 1024 * 1024; sent += chunk.length) scanner.write(chunk);
  scanner.write(Buffer.from(`\n${name} 4\n`, 'latin1'));
  scanner.end();
  assert.deepEqual(scanner.samples(0), { sum: 4, max: 4, series: 1, ignored: 0 });
});

test('at most 1,000 series of a name are read; the rest are counted as ignored, unread', () => {
  const lines: string[] = [];
  for (let i = 0; i < 1_500; i++) lines.push(`w{i="${i}"} 1`);
  lines.push('w{i="big"} 1000000');
  assert.deepEqual(scan([Buffer.from(lines.join('\n'), 'latin1')], ['w', 'v']), [{ sum: 1000, max: 1, series: 1000, ignored: 501 }, undefined]);
  // Malformed samples before the cap do not count towards it.
  const mixed = ['w five', ...lines.slice(0, 1000), 'w 2'].join('\n');
  assert.deepEqual(scan([Buffer.from(mixed, 'latin1')], ['w'])[0], { sum: 1000, max: 1, series: 1000, ignored: 2 });
});

test('reset starts a new exposition: nothing carried over, not even half a line', () => {
  const scanner = new MetricScanner(['w']);
  scanner.write(Buffer.from('w 5\nw 6', 'latin1'));
  scanner.reset();
  scanner.write(Buffer.from(' 7\nw 1\n', 'latin1'));
  scanner.end();
  assert.deepEqual(scanner.samples(0), { sum: 1, max: 1, series: 1, ignored: 0 });
  scanner.reset();
  scanner.write(Buffer.from('x'.repeat(5000), 'latin1'));
  scanner.reset();
  scanner.write(Buffer.from('\nw 2\n', 'latin1'));
  scanner.end();
  assert.deepEqual(scanner.samples(0), { sum: 2, max: 2, series: 1, ignored: 0 }, 'a skipped line does not outlive its exposition');
});

test('random chunking of random bytes never throws and always matches the one-chunk reading', () => {
  let seed = 7;
  const random = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const alphabet = Buffer.from('w{}="\\, \t\n\r#.e+-0123456789INFNa:_\xff\x00', 'latin1');
  for (let n = 0; n < 2_000; n++) {
    const body = Buffer.alloc(Math.floor(random() * 200));
    for (let i = 0; i < body.length; i++) body[i] = alphabet[Math.floor(random() * alphabet.length)]!;
    const cut = Math.floor(random() * (body.length + 1));
    assert.deepEqual(scan([body.subarray(0, cut), body.subarray(cut)], ['w']), scan([body], ['w']), JSON.stringify(body.toString('latin1')));
  }
});
