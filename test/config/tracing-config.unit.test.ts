// The `tracing` key and the OpenTelemetry environment variables (docs/configuration.md#traces):
// off by default; an endpoint alone (config or environment) turns tracing on; OTEL_SDK_DISABLED
// turns it off; the config wins over the environment, the signal's variable over the general one;
// every wrong value is a problem naming the key or the variable and the rule.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, type ConfigProblem, parseConfig } from '../../src/config/load.js';

const SERVICE = { slug: 'svc', tokens: [{ name: 't', sha256: 'a'.repeat(64) }], replicas: { urls: ['http://127.0.0.1:9000'] } };

function load(tracing: unknown, env: NodeJS.ProcessEnv = {}) {
  return parseConfig(tracing === undefined ? { services: [SERVICE] } : { services: [SERVICE], tracing }, env).tracing;
}

function problems(tracing: unknown, env: NodeJS.ProcessEnv = {}): ConfigProblem[] {
  try {
    load(tracing, env);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected the config to be rejected');
}

test('off by default, and with a tracing key but no endpoint anywhere', () => {
  assert.equal(load(undefined), undefined);
  assert.equal(load({ serviceName: 'x' }), undefined);
});

test('an endpoint in the config turns tracing on, with the SDK defaults', () => {
  assert.deepEqual(load({ endpoint: 'http://collector:4318/v1/traces' }), {
    url: 'http://collector:4318/v1/traces',
    protocol: 'http/protobuf',
    headers: {},
    sampler: { parentBased: true, ratio: 1 },
    serviceName: 'sluice',
    timeoutMs: 10_000,
    resource: {},
    batch: { delayMs: 1000, maxQueueSpans: 2048, maxBatchSpans: 512 },
    genAiProvider: 'openai',
  });
  assert.equal(load({ endpoint: 'http://c:4318', genAiProvider: 'azure.ai.openai' })!.genAiProvider, 'azure.ai.openai');
  // A URL without a path is the collector's base: /v1/traces is where traces go.
  assert.equal(load({ endpoint: 'http://collector:4318' })!.url, 'http://collector:4318/v1/traces');
  assert.deepEqual(load({ endpoint: 'https://c/v1/traces', sampleRatio: 0.25 })!.sampler, { parentBased: true, ratio: 0.25 });
});

test('OTEL_EXPORTER_OTLP_ENDPOINT alone turns it on (/v1/traces appended); the TRACES variable is used as it is and wins', () => {
  assert.equal(load(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })!.url, 'http://c:4318/v1/traces');
  assert.equal(load(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/base/' })!.url, 'http://c:4318/base/v1/traces');
  assert.equal(load(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:1/custom' })!.url, 'http://t:1/custom');
  assert.equal(load({ endpoint: 'http://config:1/v1/traces' }, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://env:1/x' })!.url, 'http://config:1/v1/traces', 'the config wins');
  assert.equal(load(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: '' }), undefined, 'empty is unset');
});

test('OTEL_SDK_DISABLED=true turns it off whatever else is set', () => {
  assert.equal(load({ endpoint: 'http://c:4318' }, { OTEL_SDK_DISABLED: 'true' }), undefined);
  assert.equal(load(undefined, { OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), undefined);
  assert.notEqual(load(undefined, { OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), undefined);
});

test('protocol, headers, service name and timeout from the environment, the config winning key by key', () => {
  const env = {
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_HEADERS: 'api-key=secret%20one,x-a=1',
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-a=2',
    OTEL_SERVICE_NAME: 'edge',
    OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
  };
  const s = load(undefined, env)!;
  assert.equal(s.protocol, 'http/json');
  assert.deepEqual(s.headers, { 'api-key': 'secret one', 'x-a': '2' });
  assert.equal(s.serviceName, 'edge');
  assert.equal(s.timeoutMs, 2500);
  const c = load({ protocol: 'http/protobuf', headers: { 'x-a': '3' }, serviceName: 'cfg' }, env)!;
  assert.equal(c.protocol, 'http/protobuf');
  assert.deepEqual(c.headers, { 'api-key': 'secret one', 'x-a': '3' });
  assert.equal(c.serviceName, 'cfg');
});

test('OTEL_TRACES_SAMPLER and its argument, as the SDKs name them', () => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
  assert.deepEqual(load(undefined, { ...on, OTEL_TRACES_SAMPLER: 'always_on' })!.sampler, { parentBased: false, ratio: 1 });
  assert.deepEqual(load(undefined, { ...on, OTEL_TRACES_SAMPLER: 'always_off' })!.sampler, { parentBased: false, ratio: 0 });
  assert.deepEqual(load(undefined, { ...on, OTEL_TRACES_SAMPLER: 'parentbased_always_off' })!.sampler, { parentBased: true, ratio: 0 });
  assert.deepEqual(load(undefined, { ...on, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' })!.sampler, { parentBased: false, ratio: 0.5 });
  assert.deepEqual(load(undefined, { ...on, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '.01' })!.sampler, { parentBased: true, ratio: 0.01 });
  assert.deepEqual(load(undefined, { ...on, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' })!.sampler, { parentBased: true, ratio: 1 }, 'no argument: 1');
  assert.deepEqual(load({ sampleRatio: 0.1 }, { ...on, OTEL_TRACES_SAMPLER: 'always_on' })!.sampler, { parentBased: true, ratio: 0.1 }, 'sampleRatio wins');
});

test('every wrong value is a problem naming the key or the variable', () => {
  const keyed = (list: ConfigProblem[]) => list.map((p) => p.key).sort();
  assert.deepEqual(keyed(problems({ endpoint: 'ftp://c', protocol: 'grpc', sampleRatio: 2, serviceName: '', headers: { 'bad name': 'x' }, extra: 1, genAiProvider: 'Open AI' })), [
    'tracing.endpoint',
    'tracing.extra',
    'tracing.genAiProvider',
    'tracing.headers["bad name"]',
    'tracing.protocol',
    'tracing.sampleRatio',
    'tracing.serviceName',
  ]);
  const env = {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    OTEL_EXPORTER_OTLP_HEADERS: 'novalue',
    OTEL_TRACES_SAMPLER: 'jaeger_remote',
    OTEL_EXPORTER_OTLP_TIMEOUT: '-1',
  };
  const found = problems(undefined, env);
  assert.deepEqual(keyed(found), ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_TRACES_SAMPLER']);
  assert.equal(found.find((p) => p.key === 'OTEL_EXPORTER_OTLP_HEADERS')!.value, '[redacted]', 'header values may be secrets');
  assert.match(found.find((p) => p.key === 'OTEL_EXPORTER_OTLP_PROTOCOL')!.rule, /gRPC is not supported/);
  assert.deepEqual(keyed(problems(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' })), ['OTEL_TRACES_SAMPLER_ARG']);
  // The problems of the file and of the environment come together.
  assert.deepEqual(keyed(problems({ sampleRatio: -1 }, { OTEL_SERVICE_NAME: 'ok', OTEL_TRACES_SAMPLER: 'nope' })), ['OTEL_TRACES_SAMPLER', 'tracing.sampleRatio']);
});

test("the batch span processor's OTEL_BSP_* variables, the config's keys winning", () => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
  const env = { ...on, OTEL_BSP_SCHEDULE_DELAY: '250', OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10', OTEL_BSP_EXPORT_TIMEOUT: '4000' };
  const s = load(undefined, env)!;
  assert.deepEqual(s.batch, { delayMs: 250, maxQueueSpans: 100, maxBatchSpans: 10 });
  assert.equal(s.timeoutMs, 4000, "the batch processor's timeout, shorter than the exporter's 10 s");
  assert.equal(load(undefined, { ...env, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '1500' })!.timeoutMs, 1500, "the exporter's, shorter");
  const c = load({ scheduleDelayMs: 0, maxQueueSize: 50, maxExportBatchSize: 50, exportTimeoutMs: 20_000 }, env)!;
  assert.deepEqual(c.batch, { delayMs: 0, maxQueueSpans: 50, maxBatchSpans: 50 });
  assert.equal(c.timeoutMs, 10_000, "the exporter's default, shorter than the config's 20 s");
  // A queue smaller than the default batch: the batch is the queue, as the SDK makes it.
  assert.deepEqual(load(undefined, { ...on, OTEL_BSP_MAX_QUEUE_SIZE: '100' })!.batch, { delayMs: 1000, maxQueueSpans: 100, maxBatchSpans: 100 });
});

test('OTEL_RESOURCE_ATTRIBUTES: resource attributes, service.name and service.version Sluice\'s own', () => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
  const s = load(undefined, { ...on, OTEL_RESOURCE_ATTRIBUTES: ' deployment.environment.name = prod%20eu ,k8s.namespace.name=ai,,service.name=from-attrs,service.version=9' })!;
  assert.deepEqual(s.resource, { 'deployment.environment.name': 'prod eu', 'k8s.namespace.name': 'ai' });
  assert.equal(s.serviceName, 'from-attrs', 'its service.name when nothing else names one');
  assert.equal(load(undefined, { ...on, OTEL_RESOURCE_ATTRIBUTES: 'service.name=a', OTEL_SERVICE_NAME: 'b' })!.serviceName, 'b', 'OTEL_SERVICE_NAME wins');
  assert.equal(load({ serviceName: 'c' }, { ...on, OTEL_RESOURCE_ATTRIBUTES: 'service.name=a', OTEL_SERVICE_NAME: 'b' })!.serviceName, 'c', 'the config wins');
});

test('wrong batch sizes and resource attributes are problems naming the key or the variable', () => {
  const keyed = (list: ConfigProblem[]) => list.map((p) => p.key).sort();
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
  assert.deepEqual(keyed(problems({ scheduleDelayMs: -1, maxQueueSize: 0, maxExportBatchSize: 1.5, exportTimeoutMs: '5' }, on)), [
    'tracing.exportTimeoutMs',
    'tracing.maxExportBatchSize',
    'tracing.maxQueueSize',
    'tracing.scheduleDelayMs',
  ]);
  assert.deepEqual(keyed(problems(undefined, { ...on, OTEL_BSP_SCHEDULE_DELAY: 'soon', OTEL_BSP_MAX_QUEUE_SIZE: '0', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '1e3', OTEL_BSP_EXPORT_TIMEOUT: '2.5' })), [
    'OTEL_BSP_EXPORT_TIMEOUT',
    'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
    'OTEL_BSP_MAX_QUEUE_SIZE',
    'OTEL_BSP_SCHEDULE_DELAY',
  ]);
  // A batch larger than the queue: named where it was set.
  assert.deepEqual(keyed(problems(undefined, { ...on, OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '101' })), ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE']);
  assert.deepEqual(keyed(problems({ maxQueueSize: 10, maxExportBatchSize: 11 }, on)), ['tracing.maxExportBatchSize']);
  for (const bad of ['novalue', '=x', 'k=%zz', `k=${'v'.repeat(256)}`, 'k=caf\u00e9']) {
    assert.deepEqual(keyed(problems(undefined, { ...on, OTEL_RESOURCE_ATTRIBUTES: `a=1,${bad}` })), ['OTEL_RESOURCE_ATTRIBUTES'], bad);
  }
});
