// The config of replica choice and queue priority: `replicas.load` (presets filled in, explicit
// names overriding them), `routing`, `tokens[].priority`, each validated with a precise rule.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { problemsOf } from '../helpers/config.js';

const DIGEST = 'ab'.repeat(32);

function service(patch: Record<string, unknown> = {}, replicas: Record<string, unknown> = {}): Record<string, unknown> {
  return { services: [{ slug: 'llm', tokens: [{ name: 't', sha256: DIGEST }], ...patch, replicas: { urls: ['http://127.0.0.1:9000'], ...replicas } }] };
}

function rejected(raw: unknown, key: string, rule: RegExp): void {
  const list = problemsOf(raw);
  const hit = list.find((p) => p.key === key);
  assert.ok(hit, `no problem at ${key}; got:\n${list.map((p) => `${p.key}: ${p.rule}`).join('\n')}`);
  assert.match(hit.rule, rule);
}

test('presets fill in the metric names of vLLM, SGLang, TGI and llama.cpp; explicit names override', () => {
  const load = (l: Record<string, unknown>) => parseConfig(service({}, { load: l })).services[0]!.replicas.load;
  assert.deepEqual(load({ preset: 'vllm' }), {
    preset: 'vllm',
    path: '/metrics',
    intervalMs: 250,
    waiting: ['vllm:num_requests_waiting'],
    cacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    running: ['vllm:num_requests_running'],
    cacheUsageHigh: 0.9,
  });
  assert.deepEqual(load({ preset: 'sglang' })?.running, ['sglang:num_running_reqs']);
  assert.deepEqual(load({ preset: 'tgi' })?.running, ['tgi_batch_current_size']);
  assert.deepEqual(load({ preset: 'llamacpp' })?.running, ['llamacpp:requests_processing']);
  assert.deepEqual(load({ preset: 'sglang' })?.waiting, ['sglang:num_queue_reqs']);
  assert.deepEqual(load({ preset: 'sglang' })?.cacheUsage, ['sglang:token_usage']);
  assert.deepEqual(load({ preset: 'tgi' })?.waiting, ['tgi_queue_size']);
  assert.deepEqual(load({ preset: 'tgi' })?.cacheUsage, []);
  assert.deepEqual(load({ preset: 'llamacpp' })?.waiting, ['llamacpp:requests_deferred']);
  const custom = load({ preset: 'vllm', waiting: 'my:queue', path: '/stats/prom', intervalMs: 1000, cacheUsageHigh: 0.8 });
  assert.deepEqual(custom, { preset: 'vllm', path: '/stats/prom', intervalMs: 1000, waiting: ['my:queue'], cacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'], running: ['vllm:num_requests_running'], cacheUsageHigh: 0.8 });
  assert.deepEqual(load({ waiting: 'llamacpp:requests_deferred', cacheUsage: 'x_cache' }), { path: '/metrics', intervalMs: 250, waiting: ['llamacpp:requests_deferred'], cacheUsage: ['x_cache'], running: [], cacheUsageHigh: 0.9 });
  assert.equal(parseConfig(service()).services[0]!.replicas.load, undefined, 'not reading loads by default');
});

test('replicas.load: every key checked, with the rule it breaks', () => {
  const l = (x: Record<string, unknown>) => service({}, { load: x });
  rejected(l({}), 'services[0].replicas.load.waiting', /is required unless replicas\.load\.preset is set/);
  rejected(l({ preset: 'ollama' }), 'services[0].replicas.load.preset', /must be one of vllm, sglang, tgi, llamacpp/);
  rejected(l({ preset: 'vllm', path: 'metrics' }), 'services[0].replicas.load.path', /must be a path beginning with '\/'/);
  rejected(l({ preset: 'vllm', path: '/a#b' }), 'services[0].replicas.load.path', /no '#'/);
  for (const bad of [10, 49, 60_001, 100.5, '250']) rejected(l({ preset: 'vllm', intervalMs: bad }), 'services[0].replicas.load.intervalMs', /from 50 to 60000/);
  for (const bad of ['9lives', 'has space', 'dash-ed', '', 3]) rejected(l({ waiting: bad }), 'services[0].replicas.load.waiting', /must be a Prometheus metric name/);
  rejected(l({ waiting: 'w', cacheUsage: 'a.b' }), 'services[0].replicas.load.cacheUsage', /must be a Prometheus metric name/);
  for (const bad of [0, -0.1, 1.01, '0.9']) rejected(l({ preset: 'vllm', cacheUsageHigh: bad }), 'services[0].replicas.load.cacheUsageHigh', /above 0 and at most 1/);
  rejected(l({ preset: 'tgi', cacheUsageHigh: 0.8 }), 'services[0].replicas.load.cacheUsageHigh', /applies only with a cache usage metric/);
  rejected(l({ waiting: 'w', cacheUsageHigh: 0.8 }), 'services[0].replicas.load.cacheUsageHigh', /applies only with a cache usage metric/);
  rejected(l({ preset: 'vllm', interval: 100 }), 'services[0].replicas.load.interval', /unknown key \(did you mean intervalMs\?\)/);
  rejected(service({}, { load: 'vllm' }), 'services[0].replicas.load', /must be \{ preset \}/);
  // Every problem at once.
  const all = problemsOf(l({ preset: 'nope', intervalMs: 1, path: 'x' })).map((p) => p.key);
  for (const key of ['preset', 'intervalMs', 'path']) assert.ok(all.includes(`services[0].replicas.load.${key}`), key);
});

test('routing: the affinity header (lower-cased), its bound, and what cannot be one', () => {
  const r = parseConfig(service({ routing: { affinityHeader: 'X-Session-Id' } })).services[0]!.routing;
  assert.deepEqual(r, { affinityHeader: 'x-session-id', affinityMaxLoad: 1.25 });
  assert.deepEqual(parseConfig(service()).services[0]!.routing, { affinityMaxLoad: 1.25 });
  for (const h of ['Authorization', 'Content-Type', 'accept', 'Host', 'X-Sluice-Priority', 'x-sluice-max-wait-ms', 'Content-Length']) {
    rejected(service({ routing: { affinityHeader: h } }), 'services[0].routing.affinityHeader', /must not be a header Sluice reads itself/);
  }
  for (const h of ['x session', '', 'a:b']) rejected(service({ routing: { affinityHeader: h } }), 'services[0].routing.affinityHeader', /must be a header field name/);
  for (const bad of [0.99, 0, 101, '2']) rejected(service({ routing: { affinityHeader: 'x-s', affinityMaxLoad: bad } }), 'services[0].routing.affinityMaxLoad', /from 1 to 100/);
  rejected(service({ routing: { affinityMaxLoad: 2 } }), 'services[0].routing.affinityMaxLoad', /applies only with routing\.affinityHeader/);
  assert.equal(parseConfig(service({ routing: { affinityHeader: 'x-s', affinityMaxLoad: 1 } })).services[0]!.routing.affinityMaxLoad, 1);
});

test('tokens[].priority: an integer from -1000 to 1000, 0 by default; X-Sluice-* can never be forwarded', () => {
  const tokens = parseConfig(service({ tokens: [{ name: 'a', sha256: DIGEST, priority: 1000 }, { name: 'b', sha256: 'cd'.repeat(32) }] })).services[0]!.tokens;
  assert.deepEqual(tokens.map((t) => t.priority), [1000, 0]);
  for (const bad of [1001, -1001, 1.5, '1', null]) {
    rejected(service({ tokens: [{ name: 'a', sha256: DIGEST, priority: bad }] }), 'services[0].tokens[0].priority', /must be an integer from -1000 to 1000/);
  }
  for (const h of ['X-Sluice-Priority', 'x-sluice-max-wait-ms']) {
    rejected(service({ forwardHeaders: [h] }), 'services[0].forwardHeaders[0]', /cannot be forwarded: read by Sluice/);
  }
});
