// The load reader's Prometheus text reading on its own (the scanner fed a whole exposition, and the
// sample grammar behind it): the samples of one metric summed and maxed over series, everything
// else ignored, malformed samples skipped, never a throw. Reading in chunks: metric-scanner.unit.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type MetricSamples, MetricScanner } from '../../src/control/service/metric-scanner.js';

/** The samples of `name` in `text`, read in one chunk. */
function readMetric(text: string, name: string): MetricSamples | undefined {
  const scanner = new MetricScanner([name]);
  scanner.write(Buffer.from(text, 'latin1'));
  scanner.end();
  return scanner.samples(0);
}

/** What vLLM 0.11 exposes, trimmed: HELP/TYPE, two engines, histograms, a similarly named metric. */
const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 9.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
# HELP vllm:num_requests_waiting_by_reason Requests waiting, by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 100.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.93
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 17.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 17.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 2.5
`;

test('vLLM: waiting summed over engines, cache usage maxed; similar names, HELP and TYPE ignored', () => {
  assert.deepEqual(readMetric(VLLM, 'vllm:num_requests_waiting'), { sum: 7, max: 4, series: 2, ignored: 0 });
  assert.deepEqual(readMetric(VLLM, 'vllm:kv_cache_usage_perc'), { sum: 1.35, max: 0.93, series: 2, ignored: 0 });
  assert.equal(readMetric(VLLM, 'vllm:gpu_cache_usage_perc'), undefined, 'absent');
  assert.equal(readMetric(VLLM, 'vllm:time_to_first_token_seconds'), undefined, 'only _bucket, _count and _sum lines: not the name itself');
  assert.equal(readMetric(VLLM, 'vllm:time_to_first_token_seconds_count')?.sum, 17);
  assert.equal(readMetric(VLLM, 'vllm:num_requests'), undefined, 'a prefix of names is not a name');
});

test('SGLang, TGI and llama.cpp shapes: labels, no labels, a timestamp', () => {
  const sglang = '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{model_name="qwen",engine_type="unified",tp_rank="0"} 5.0\nsglang:token_usage{model_name="qwen"} 0.91\n';
  assert.equal(readMetric(sglang, 'sglang:num_queue_reqs')?.sum, 5);
  assert.equal(readMetric(sglang, 'sglang:token_usage')?.max, 0.91);
  assert.equal(readMetric('# TYPE tgi_queue_size gauge\ntgi_queue_size 2\n', 'tgi_queue_size')?.sum, 2);
  assert.equal(readMetric('llamacpp:requests_deferred 4 1712345678901\n', 'llamacpp:requests_deferred')?.sum, 4, 'a millisecond timestamp');
  assert.equal(readMetric('x 1.5e1', 'x')?.sum, 15, 'an exponent, and no newline at the end');
  assert.equal(readMetric('x\t3\r\n', 'x')?.sum, 3, 'tab-separated, CRLF');
  assert.equal(readMetric('  x 3\n', 'x')?.sum, 3, 'leading blanks');
  assert.equal(readMetric('x{} 3\n', 'x')?.sum, 3, 'empty braces');
  assert.equal(readMetric('x{a="1",} 3\n', 'x')?.sum, 3, 'a trailing comma');
  assert.equal(readMetric('x { a = "1" } 3\n', 'x')?.sum, 3, 'blanks around the label tokens');
});

test('label values may hold escaped quotes, backslashes, newlines, braces and the metric name itself', () => {
  const text = [
    'x{path="a\\"b",other="c\\\\"} 1',
    'x{note="has } and { and \\n and x 99"} 2',
    'y{label="\\nx 1000"} 7',
    'x{q="x{a=\\"1\\"} 5"} 4',
  ].join('\n');
  assert.deepEqual(readMetric(text, 'x'), { sum: 7, max: 4, series: 3, ignored: 0 });
});

test('NaN and infinities are skipped and counted; a metric with only those is absent', () => {
  const text = 'w{e="0"} NaN\nw{e="1"} +Inf\nw{e="2"} -inf\nw{e="3"} 2\nv Nan\n';
  assert.deepEqual(readMetric(text, 'w'), { sum: 2, max: 2, series: 1, ignored: 3 });
  assert.equal(readMetric(text, 'v'), undefined);
});

test('OpenMetrics: exemplars after #, seconds timestamps, # EOF', () => {
  const text = '# TYPE w gauge\nw{e="0"} 3 # {trace_id="abc"} 1.0 1712345678.123\nw{e="1"} 2 1712345678.5 # {trace_id="d"} 2\nw{e="2"} 1 #\n# EOF\n';
  assert.deepEqual(readMetric(text, 'w'), { sum: 6, max: 3, series: 3, ignored: 0 });
});

test('malformed samples of the name are skipped, never guessed at', () => {
  const bad = [
    'w{a="unterminated} 5', // the quote never closes on this line
    'w{a="1"',
    'w{a=1} 5', // an unquoted value
    'w{="1"} 5',
    'w{1a="1"} 5',
    'w{a="1" b="2"} 5', // no comma
    'w{a="\\x"} 5', // an escape the format does not have
    'w', // no value
    'w{a="1"}', // no value
    'w{a="1"}5', // no blank before the value
    'w 5 6 7', // junk after the timestamp
    'w 0x10', // hex is not a Prometheus value
    'w 5 abc',
    'w 1,5',
    'w five',
    'w 5e',
    'w .',
  ];
  for (const line of bad) assert.equal(readMetric(`${line}\n`, 'w'), undefined, JSON.stringify(line));
  const mixed = `${bad.join('\n')}\nw{a="ok"} 9\n`;
  assert.deepEqual(readMetric(mixed, 'w'), { sum: 9, max: 9, series: 1, ignored: bad.length });
  // A raw newline inside a label value ends the line: the sample is malformed, the next line is read alone.
  assert.deepEqual(readMetric('w{a="x\nw 4\n', 'w'), { sum: 4, max: 4, series: 1, ignored: 1 });
});

test('garbage never throws, and never yields a reading', () => {
  let seed = 3;
  const random = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const alphabet = 'w{}="\\, \t\n#.e+-0123456789abcINFNa:_';
  for (let n = 0; n < 5_000; n++) {
    let text = '';
    const length = Math.floor(random() * 60);
    for (let i = 0; i < length; i++) text += alphabet[Math.floor(random() * alphabet.length)];
    const found = readMetric(text, 'w');
    if (found !== undefined) {
      assert.ok(Number.isFinite(found.sum) && found.series > 0, JSON.stringify(text));
    }
  }
  assert.equal(readMetric('', 'w'), undefined);
  assert.equal(readMetric('w 1', ''), undefined, 'an empty name is never found');
  assert.equal(readMetric('\u0000\uffff w 1', 'w'), undefined, 'not at the start of a line');
});
