// Where traces go (docs/operations.md#traces): the config's `tracing` key, validated by the schema
// (schema.ts takes `tracingSchema` from here), and the OpenTelemetry environment variables
// read as the OpenTelemetry SDKs read them, merged once at load (load.ts: `sluice check`,
// `serve` and a SIGHUP reload alike) into the settings a data plane thread traces by, or none.
//
// The SDKs' rules, kept: a key set in code (here: in the config file) wins over the environment;
// an endpoint alone turns tracing on; `OTEL_SDK_DISABLED=true` turns it off whatever else is set;
// an empty variable counts as unset; `OTEL_EXPORTER_OTLP_ENDPOINT` is a base URL that
// `/v1/traces` is appended to, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` the URL itself; the signal's
// own variable (`…_TRACES_…`) wins over the general one; headers are `key=value` pairs separated
// by commas, values percent-decoded; `OTEL_RESOURCE_ATTRIBUTES` adds resource attributes
// (`service.name` from the config or `OTEL_SERVICE_NAME` winning over its own); the batch span
// processor's `OTEL_BSP_*` size the export queue and its batches. Where an SDK would warn and fall
// back (an unknown sampler, a ratio out of range, protocol `grpc`, a number that is not one, a
// batch larger than the queue), Sluice refuses the config instead, naming the variable.
import { z } from 'zod';
import { strict } from './rules.js';
import type { ConfigProblem } from './problems.js';
import { TRACE_BATCH_SPANS, TRACE_EXPORT_DELAY_MS, TRACE_QUEUE_SPANS } from '../tunables.js';

type TraceProtocol = 'http/protobuf' | 'http/json';

/** The `tracing` key as written (validated), before the environment is merged in. */
export interface TracingConfig {
  endpoint?: string | undefined;
  protocol?: TraceProtocol | undefined;
  headers?: Record<string, string> | undefined;
  sampleRatio?: number | undefined;
  serviceName?: string | undefined;
  scheduleDelayMs?: number | undefined;
  maxQueueSize?: number | undefined;
  maxExportBatchSize?: number | undefined;
  exportTimeoutMs?: number | undefined;
  genAiProvider?: string | undefined;
}

/** How a request is chosen for a trace (the OpenTelemetry samplers Sluice knows). */
interface TraceSampler {
  /** A caller's sampled `traceparent` decides for its request (parentbased_*). */
  parentBased: boolean;
  /** The share of the other requests traced: 1 = all, 0 = none. */
  ratio: number;
}

/** What a data plane thread traces by: tracing is on. */
export interface TracingSettings {
  /** The URL spans are posted to. */
  url: string;
  protocol: TraceProtocol;
  headers: Record<string, string>;
  sampler: TraceSampler;
  serviceName: string;
  /** How long one export may take before its spans are counted lost, ms (the exporter's timeout, or the batch processor's if shorter). */
  timeoutMs: number;
  /** Resource attributes besides `service.name` and `service.version` (`OTEL_RESOURCE_ATTRIBUTES`). */
  resource: Record<string, string>;
  /** The batch span processor's sizes: how long finished spans may wait for a batch to fill, ms; the most spans queued; the most in one export. */
  batch: { delayMs: number; maxQueueSpans: number; maxBatchSpans: number };
  /** `gen_ai.provider.name` of OpenAI-style requests' spans. */
  genAiProvider: string;
}

/** The longest delay or timeout taken (an hour), and the largest queue (a bound on memory: about 1 KiB a span). */
const MAX_DELAY_MS = 3_600_000;
const MAX_QUEUE_SPANS = 1_000_000;

const RULE_TRACING = {
  tracing: 'must be an object with endpoint, protocol, headers, sampleRatio, serviceName, scheduleDelayMs, maxQueueSize, maxExportBatchSize, exportTimeoutMs, genAiProvider (every key optional; without an endpoint here or in OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT tracing stays off)',
  endpoint: 'must be an http:// or https:// URL of an OTLP/HTTP receiver (a URL without a path gets /v1/traces)',
  protocol: "must be 'http/protobuf' or 'http/json' (OTLP over gRPC is not supported)",
  headers: 'must be an object of header names to string values, sent with every export',
  sampleRatio: 'must be a number from 0 to 1: the share of requests traced whose caller sent no sampled traceparent',
  serviceName: 'must be a non-empty string: service.name of the spans',
  scheduleDelayMs: `must be an integer from 0 to ${MAX_DELAY_MS} (milliseconds)`,
  maxQueueSize: `must be an integer from 1 to ${MAX_QUEUE_SPANS} (spans)`,
  maxExportBatchSize: `must be an integer from 1 to ${MAX_QUEUE_SPANS} (spans), at most the queue's size`,
  exportTimeoutMs: `must be an integer from 1 to ${MAX_DELAY_MS} (milliseconds)`,
  genAiProvider: "must be 1 to 64 lowercase letters, digits, '.' or '_' (a gen_ai.provider.name value, e.g. openai, azure.ai.openai)",
} as const;

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function integer(min: number, max: number, rule: string) {
  return z.number({ error: rule }).int({ error: rule }).min(min, { error: rule }).max(max, { error: rule }).describe(rule).optional();
}

export const tracingSchema = strict(
  {
    endpoint: z.string({ error: RULE_TRACING.endpoint }).refine((u) => endpointUrl(u) !== undefined, { error: RULE_TRACING.endpoint }).describe(RULE_TRACING.endpoint).optional(),
    protocol: z.enum(['http/protobuf', 'http/json'], { error: RULE_TRACING.protocol }).describe(RULE_TRACING.protocol).optional(),
    headers: z
      .record(z.string().regex(HEADER_NAME, { error: RULE_TRACING.headers }), z.string({ error: RULE_TRACING.headers }).regex(/^[\t\x20-\x7e]*$/, { error: RULE_TRACING.headers }), { error: RULE_TRACING.headers })
      .describe(RULE_TRACING.headers)
      .optional(),
    sampleRatio: z.number({ error: RULE_TRACING.sampleRatio }).min(0, { error: RULE_TRACING.sampleRatio }).max(1, { error: RULE_TRACING.sampleRatio }).describe(RULE_TRACING.sampleRatio).optional(),
    serviceName: z.string({ error: RULE_TRACING.serviceName }).min(1, { error: RULE_TRACING.serviceName }).describe(RULE_TRACING.serviceName).optional(),
    scheduleDelayMs: integer(0, MAX_DELAY_MS, RULE_TRACING.scheduleDelayMs),
    maxQueueSize: integer(1, MAX_QUEUE_SPANS, RULE_TRACING.maxQueueSize),
    maxExportBatchSize: integer(1, MAX_QUEUE_SPANS, RULE_TRACING.maxExportBatchSize),
    exportTimeoutMs: integer(1, MAX_DELAY_MS, RULE_TRACING.exportTimeoutMs),
    genAiProvider: z.string({ error: RULE_TRACING.genAiProvider }).regex(/^[a-z0-9._]{1,64}$/, { error: RULE_TRACING.genAiProvider }).describe(RULE_TRACING.genAiProvider).optional(),
  },
  RULE_TRACING.tracing,
)
  .optional()
  .describe(RULE_TRACING.tracing);

/** The defaults the SDKs use where nothing is set. */
const DEFAULT_SERVICE_NAME = 'sluice';
const DEFAULT_TIMEOUT_MS = 10_000;
/**
 * `gen_ai.provider.name` by default: the GenAI conventions name the provider as the
 * instrumentation knows it, by the API it speaks (a discriminator of which provider-specific
 * attributes to expect), and Sluice recognizes the OpenAI API's paths only.
 */
const DEFAULT_GEN_AI_PROVIDER = 'openai';
/** The batch span processor's export timeout (the SDK's default). */
const DEFAULT_EXPORT_TIMEOUT_MS = 30_000;

/** `url` as the receiver's URL: http(s) only; a URL without a path gets `/v1/traces`. Undefined if not one. */
function endpointUrl(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') return undefined;
  if (url.pathname === '/') url.pathname = '/v1/traces';
  return url.href;
}

/** An env variable's value, or undefined when unset or empty. */
function env(vars: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = vars[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The settings of `tracing` merged with the environment, or undefined when tracing is off; every
 * problem of the environment's values is added to `problems` (keyed by the variable's name).
 */
export function resolveTracing(config: TracingConfig | undefined, vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): TracingSettings | undefined {
  const disabled = env(vars, 'OTEL_SDK_DISABLED');
  if (disabled !== undefined && disabled.toLowerCase() === 'true') return undefined;
  const url = configuredUrl(config, vars, problems);
  const protocol = config?.protocol ?? protocolFrom(vars, problems);
  const headers = { ...headersFrom(vars, 'OTEL_EXPORTER_OTLP_HEADERS', problems), ...headersFrom(vars, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', problems), ...config?.headers };
  const sampler = config?.sampleRatio !== undefined ? { parentBased: true, ratio: config.sampleRatio } : samplerFrom(vars, problems);
  const exportTimeoutMs = config?.exportTimeoutMs ?? numberFrom(vars, 'OTEL_BSP_EXPORT_TIMEOUT', 1, MAX_DELAY_MS, problems) ?? DEFAULT_EXPORT_TIMEOUT_MS;
  const timeoutMs = Math.min(timeoutFrom(vars, problems), exportTimeoutMs);
  const resource = resourceFrom(vars, problems);
  const batch = batchFrom(config, vars, problems);
  if (url === undefined) return undefined;
  const serviceName = config?.serviceName ?? env(vars, 'OTEL_SERVICE_NAME') ?? resource['service.name'] ?? DEFAULT_SERVICE_NAME;
  // service.name and service.version are Sluice's own (the name as above, the version its build's).
  delete resource['service.name'];
  delete resource['service.version'];
  return { url, protocol, headers, sampler, serviceName, timeoutMs, resource, batch, genAiProvider: config?.genAiProvider ?? DEFAULT_GEN_AI_PROVIDER };
}

/** The batch span processor's sizes: the config's keys, else `OTEL_BSP_*`, else Sluice's defaults; a batch is at most the queue. */
function batchFrom(config: TracingConfig | undefined, vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): TracingSettings['batch'] {
  const delayMs = config?.scheduleDelayMs ?? numberFrom(vars, 'OTEL_BSP_SCHEDULE_DELAY', 0, MAX_DELAY_MS, problems) ?? TRACE_EXPORT_DELAY_MS;
  const maxQueueSpans = config?.maxQueueSize ?? numberFrom(vars, 'OTEL_BSP_MAX_QUEUE_SIZE', 1, MAX_QUEUE_SPANS, problems) ?? TRACE_QUEUE_SPANS;
  const batchSet = config?.maxExportBatchSize ?? numberFrom(vars, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 1, MAX_QUEUE_SPANS, problems);
  const maxBatchSpans = batchSet ?? Math.min(TRACE_BATCH_SPANS, maxQueueSpans);
  if (maxBatchSpans > maxQueueSpans) {
    const key = config?.maxExportBatchSize !== undefined ? 'tracing.maxExportBatchSize' : 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE';
    problems.push({ key, value: maxBatchSpans, rule: `must be at most the export queue's size (${maxQueueSpans} spans: tracing.maxQueueSize or OTEL_BSP_MAX_QUEUE_SIZE)` });
  }
  return { delayMs, maxQueueSpans, maxBatchSpans: Math.min(maxBatchSpans, maxQueueSpans) };
}

/** A variable holding an integer from `min` to `max` (the SDK reads a number; a fraction is refused here), or undefined when unset or wrong. */
function numberFrom(vars: NodeJS.ProcessEnv, name: string, min: number, max: number, problems: ConfigProblem[]): number | undefined {
  const value = env(vars, name);
  if (value === undefined) return undefined;
  const n = /^[0-9]{1,10}$/.test(value) ? Number(value) : Number.NaN;
  if (n >= min && n <= max) return n;
  problems.push({ key: name, value, rule: `must be an integer from ${min} to ${max}` });
  return undefined;
}

/**
 * `OTEL_RESOURCE_ATTRIBUTES`: `key1=value1,key2=value2`, values percent-decoded, keys and values
 * printable ASCII of at most 255 characters (the resource SDK's rules; it drops them all when one
 * is wrong: here, a problem).
 */
function resourceFrom(vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): Record<string, string> {
  const name = 'OTEL_RESOURCE_ATTRIBUTES';
  const text = env(vars, name);
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const [key, value] of keyValuePairs(text)) {
    if (!/^[\x21-\x7e]{1,255}$/.test(key) || value === undefined || !/^[\x20-\x7e]{0,255}$/.test(value)) {
      problems.push({ key: name, value: text, rule: 'must be key=value pairs separated by commas (printable ASCII keys, percent-encoded values, each at most 255 characters)' });
      return {};
    }
    out[key] = value;
  }
  return out;
}

/**
 * The pairs of a `key1=value1,key2=value2` variable (W3C Baggage's format, which the OTLP headers
 * and resource attributes share): keys and values trimmed, values percent-decoded; a pair with no
 * `=` has the key '', a value that does not decode is undefined. Empty pairs are skipped.
 */
function keyValuePairs(text: string): [string, string | undefined][] {
  const pairs: [string, string | undefined][] = [];
  for (const pair of text.split(',')) {
    if (pair.trim() === '') continue;
    const eq = pair.indexOf('=');
    let value: string | undefined;
    try {
      value = eq < 0 ? undefined : decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      value = undefined;
    }
    pairs.push([eq < 0 ? '' : pair.slice(0, eq).trim(), value]);
  }
  return pairs;
}

function configuredUrl(config: TracingConfig | undefined, vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): string | undefined {
  if (config?.endpoint !== undefined) return endpointUrl(config.endpoint);
  const signal = env(vars, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (signal !== undefined) {
    const url = endpointUrl(signal);
    if (url === undefined) problems.push({ key: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', value: signal, rule: RULE_TRACING.endpoint });
    // As the SDKs do, the signal's URL is used as it is.
    return url === undefined ? undefined : signal;
  }
  const base = env(vars, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (base === undefined) return undefined;
  if (endpointUrl(base) === undefined) {
    problems.push({ key: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: base, rule: 'must be an http:// or https:// base URL of an OTLP/HTTP receiver (/v1/traces is appended)' });
    return undefined;
  }
  return `${base.endsWith('/') ? base : `${base}/`}v1/traces`;
}

function protocolFrom(vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): TraceProtocol {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const value = env(vars, name);
    if (value === undefined) continue;
    if (value === 'http/protobuf' || value === 'http/json') return value;
    problems.push({ key: name, value, rule: RULE_TRACING.protocol });
    break;
  }
  return 'http/protobuf';
}

/** `OTEL_EXPORTER_OTLP_HEADERS`: `key1=value1,key2=value2`, values percent-decoded (W3C Baggage's format). */
function headersFrom(vars: NodeJS.ProcessEnv, name: string, problems: ConfigProblem[]): Record<string, string> {
  const text = env(vars, name);
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const [key, value] of keyValuePairs(text)) {
    if (!HEADER_NAME.test(key) || value === undefined || !/^[\t\x20-\x7e]*$/.test(value)) {
      problems.push({ key: name, value: '[redacted]', rule: 'must be key=value pairs separated by commas (header names, percent-encoded values)' });
      return {};
    }
    out[key.toLowerCase()] = value;
  }
  return out;
}

const SAMPLERS: Record<string, { parentBased: boolean; ratio: number | undefined }> = {
  always_on: { parentBased: false, ratio: 1 },
  always_off: { parentBased: false, ratio: 0 },
  traceidratio: { parentBased: false, ratio: undefined },
  parentbased_always_on: { parentBased: true, ratio: 1 },
  parentbased_always_off: { parentBased: true, ratio: 0 },
  parentbased_traceidratio: { parentBased: true, ratio: undefined },
};

/** `OTEL_TRACES_SAMPLER` and its `_ARG` (the ratio of the traceidratio samplers; default 1). */
function samplerFrom(vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): TraceSampler {
  const name = env(vars, 'OTEL_TRACES_SAMPLER');
  const known = name === undefined ? SAMPLERS.parentbased_always_on! : SAMPLERS[name];
  if (known === undefined) {
    problems.push({ key: 'OTEL_TRACES_SAMPLER', value: name, rule: `must be one of ${Object.keys(SAMPLERS).join(', ')}` });
    return { parentBased: true, ratio: 1 };
  }
  if (known.ratio !== undefined) return { parentBased: known.parentBased, ratio: known.ratio };
  const arg = env(vars, 'OTEL_TRACES_SAMPLER_ARG');
  if (arg === undefined) return { parentBased: known.parentBased, ratio: 1 };
  const ratio = /^(?:[0-9]+\.?[0-9]*|\.[0-9]+)$/.test(arg) ? Number(arg) : Number.NaN;
  if (!(ratio >= 0 && ratio <= 1)) {
    problems.push({ key: 'OTEL_TRACES_SAMPLER_ARG', value: arg, rule: `must be a number from 0 to 1 (the ratio of ${name!})` });
    return { parentBased: known.parentBased, ratio: 1 };
  }
  return { parentBased: known.parentBased, ratio };
}

function timeoutFrom(vars: NodeJS.ProcessEnv, problems: ConfigProblem[]): number {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', 'OTEL_EXPORTER_OTLP_TIMEOUT']) {
    const value = env(vars, name);
    if (value === undefined) continue;
    if (/^[0-9]{1,9}$/.test(value) && Number(value) > 0) return Number(value);
    problems.push({ key: name, value, rule: 'must be an integer ≥ 1 (milliseconds)' });
    break;
  }
  return DEFAULT_TIMEOUT_MS;
}
