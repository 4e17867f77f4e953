// Sluice's OTLP protobuf encoding (src/tracing/otlp-protobuf.ts) against the OpenTelemetry SDK's
// (`@opentelemetry/otlp-transformer`'s serializer over the same span trees as `ReadableSpan`s),
// both decoded with the OpenTelemetry project's generated decoders: the same spans, attributes,
// events, status, flags and times, for trees with every kind of span and values that exercise the
// wire format (non-ASCII and long strings, lengths past one varint byte, doubles, booleans, an
// IPv6 replica, a remote parent).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OtlpProtobuf } from '../../src/tracing/otlp-protobuf.js';
import { type EndedRecord, type EndedRequest, RequestTrace } from '../../src/tracing/request-trace.js';
import { spansOf } from '../../src/tracing/span-records.js';

const require = createRequire(import.meta.url);
interface Decoder {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
}
const REQUEST = (require('otlp-protos/build/src/generated/root.js') as { opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: Decoder } } } } } }).opentelemetry.proto.collector.trace.v1
  .ExportTraceServiceRequest;

type Span = { spanId: string; parentSpanId?: string; name: string } & Record<string, unknown>;
type Decoded = { resourceSpans: { resource: unknown; scopeSpans: { scope: unknown; spans: Span[] }[] }[] };

function decode(bytes: Uint8Array): Decoded {
  return REQUEST.toObject(REQUEST.decode(bytes), { longs: String, bytes: String, enums: Number, defaults: false }) as Decoded;
}

/** Internal spans get a new random id each time a tree is written: named by their span's name instead. */
function normalized(d: Decoded): Decoded {
  const ids = new Map<string, string>();
  for (const rs of d.resourceSpans) for (const ss of rs.scopeSpans) for (const s of ss.spans) if (s.name === 'admission' || s.name === 'queue' || s.name === 'cold start') ids.set(s.spanId, s.name);
  for (const rs of d.resourceSpans)
    for (const ss of rs.scopeSpans)
      for (const s of ss.spans) {
        s.spanId = ids.get(s.spanId) ?? s.spanId;
        if (s.parentSpanId !== undefined) s.parentSpanId = ids.get(s.parentSpanId) ?? s.parentSpanId;
      }
  return d;
}

/**
 * Proto3 reads an absent field as its zero: the SDK writes some zeros (dropped counts, status
 * UNSET) that the encoder leaves out. Times are taken out into `times` (compared apart).
 */
function withoutDefaults(value: unknown, times: bigint[]): unknown {
  if (Array.isArray(value)) return value.map((v) => withoutDefaults(v, times));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key.endsWith('UnixNano')) {
      times.push(BigInt(v as string));
      continue;
    }
    if (v === 0 || (key === 'status' && (v as { code?: number }).code === 0 && Object.keys(v as object).length === 1)) continue;
    out[key] = withoutDefaults(v, times);
  }
  return out;
}

const sink = { finished: (): void => undefined };
const base = performance.now();

function request(over: Partial<EndedRequest>): EndedRequest {
  return {
    method: 'POST',
    path: '/v1/chat/completions',
    slug: 'svc',
    routedBy: undefined,
    requestId: 'abcdef012345-1',
    token: { name: 'caller' },
    priority: 10,
    queuedAt: 0,
    queuedMs: 0,
    limit: undefined,
    error: undefined,
    stream: undefined,
    downstream: { firstByteAt: base + 30.5, answered: true },
    fields: undefined,
    ...over,
  };
}

function record(over: Partial<EndedRecord>): EndedRecord {
  return { status: 200, outcome: 'ok', ms: 1234.5678, promptTokens: 0, completionTokens: 0, usageReported: false, ...over };
}

function traces(): RequestTrace[] {
  const out: RequestTrace[] = [];
  // A streamed chat, continued from a caller, queued on a cold start, retried, with a model name past 127 bytes and non-ASCII.
  const model = `modèle-${'x'.repeat(200)}-模型`;
  const a = new RequestTrace(sink, '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 'k=v', base, 'chat');
  a.fields = { requestedModel: model, requestedMaxTokens: () => 300 };
  a.admitted(base + 0.25);
  a.queued(3, true, 1500.5);
  a.dispatched(base + 1600);
  a.connected('[::1]:9000');
  a.attemptFailed('upstream_unavailable');
  a.dispatched(base + 1601);
  a.connected('127.0.0.1:9001');
  a.answered(200, base + 1700.125);
  a.answerChunk(Buffer.from(`data: {"model":"served-${'é'.repeat(3)}"}\n\n`));
  a.finish(
    request({ queuedAt: base + 1, queuedMs: 1599, limit: {}, stream: { events: 42, firstEventAt: base + 1710, lastEventAt: base + 2000 }, routedBy: 'router' }),
    record({ ms: 2100.75, promptTokens: 7, completionTokens: 300, usageReported: true }),
  );
  out.push(a);
  // Refused by its limits, with a long path.
  const b = new RequestTrace(sink, 'aaf92f3577b34da6a3ce929d0e0e4736', undefined, undefined, base + 5, undefined);
  b.finish(request({ path: `/v1/${'p'.repeat(300)}`, error: { code: 'rate_limited', limit: 'requestsPerMinute' }, downstream: { firstByteAt: 0, answered: false } }), record({ status: 429, outcome: 'rate_limited', ms: 0.01 }));
  out.push(b);
  // A replica that timed out: 504, an error status.
  const c = new RequestTrace(sink, 'bbf92f3577b34da6a3ce929d0e0e4736', undefined, undefined, base + 9, undefined);
  c.dispatched(base + 9.5);
  c.connected('10.0.0.5:8000');
  c.finish(request({ path: '/v1/infer', error: { code: 'upstream_timeout' }, downstream: { firstByteAt: 0, answered: false } }), record({ status: 504, outcome: 'upstream_timeout', ms: 60000 }));
  out.push(c);
  return out;
}

test("Sluice's OTLP protobuf decodes to what the SDK's serializer writes for the same spans", () => {
  const all = traces();
  const attributes = { 'service.name': 'gw', 'service.version': '1.2.3' };
  const scope = { name: 'sluice', version: '1.2.3' };
  const ours = decode(new OtlpProtobuf({ basePath: '/api/v1/services', provider: 'openai' }, attributes, scope).encode(all));
  const theirs = ProtobufTraceSerializer.serializeRequest(spansOf(all, { resource: resourceFromAttributes(attributes), scope, basePath: '/api/v1/services', provider: 'openai' }))!;
  const reference = decode(theirs);
  const ourTimes: bigint[] = [];
  const theirTimes: bigint[] = [];
  assert.deepEqual(withoutDefaults(normalized(ours), ourTimes), withoutDefaults(normalized(reference), theirTimes));
  // The SDK's spans carry times as [seconds, nanoseconds] made from a float of milliseconds since
  // the epoch (about 0.2 µs apart at today's dates); the encoder adds nanoseconds to the origin exactly.
  assert.equal(ourTimes.length, theirTimes.length);
  ourTimes.forEach((t, i) => assert.ok(t - theirTimes[i]! < 1000n && theirTimes[i]! - t < 1000n, `time ${i}: ${t} and ${theirTimes[i]}`));
  const spans = ours.resourceSpans[0]!.scopeSpans[0]!.spans;
  assert.equal(spans.length, 6 + 2 + 2, 'server, admission, queue, cold start, two tries; server and admission; server and a try');
});

test('one encoder serves batch after batch (its buffer grows and is reused)', () => {
  const encoder = new OtlpProtobuf({ basePath: '', provider: 'openai' }, { 'service.name': 'gw' }, { name: 'sluice', version: '1' });
  const many = Array.from({ length: 200 }, () => traces()).flat();
  const big = decode(encoder.encode(many));
  assert.equal(big.resourceSpans[0]!.scopeSpans[0]!.spans.length, 200 * 10);
  const small = decode(encoder.encode(traces().slice(1, 2)));
  assert.equal(small.resourceSpans[0]!.scopeSpans[0]!.spans.length, 2);
});
