// A traced request's span tree, written from its recorder (request-trace.ts) when its batch is
// exported (span-export.ts), off the request path, to a `SpanWriter`: the OTLP protobuf encoder
// (otlp-protobuf.ts, the default protocol) or the OpenTelemetry SDK's `ReadableSpan`s that its
// OTLP/JSON exporter serializes (`spansOf`, below). The tree is decided here, once, for both:
//
//   SERVER  {method} {route}                   the request, arrival to end (events: first token, last token)
//   ├── INTERNAL admission                     a limited token's, or a router's request: until its gate opened
//   ├── INTERNAL queue                         waiting for a replica (priority, place, how it left)
//   │   └── INTERNAL cold start                the start it waited on (expected and actual)
//   └── CLIENT  {operation} {model} | {method} each try on a replica (event: status line); the
//                                              replica's traceparent names it
//
// Attributes follow the HTTP and GenAI semantic conventions (gen-ai.ts), plus `sluice.*`.
import { type Attributes, type HrTime, type SpanContext, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';
import { GEN_AI } from './gen-ai.js';
import { newSpanId } from './trace-context.js';
import type { EndedSummary, RequestTrace } from './request-trace.js';

type Resource = ReadableSpan['resource'];
type InstrumentationScope = ReadableSpan['instrumentationScope'];

/** Where a span tree is written: one span at a time, `begin`, its attributes and events, `end`. */
export interface SpanWriter {
  begin(traceId: string, spanId: string, parentSpanId: string | undefined, remoteParent: boolean, name: string, kind: SpanKind, start: number, end: number): void;
  attr(key: string, value: string | number | boolean): void;
  /** An event at `at` (`performance.now()`), with one numeric attribute if `key` is given. */
  event(name: string, at: number, key?: string, value?: number): void;
  end(error: string | undefined): void;
}

/** What every span tree of a thread is written with. */
export interface SpanPlace {
  /** The relay's path prefix (`basePath`), for `url.path` and the route. */
  readonly basePath: string;
  /** `gen_ai.provider.name` of OpenAI-style requests (`tracing.genAiProvider`). */
  readonly provider: string;
}

/** The strings a service's (or router's) spans repeat, made once per slug: no concatenation per span. */
interface SlugStrings {
  /** `{basePath}/{slug}/request/{path}` (`http.route`). */
  readonly route: string;
  /** `{basePath}/{slug}/request`: `url.path` is it and the request's path. */
  readonly prefix: string;
  /** The SERVER span's name by method (`{method} {route}`). */
  readonly names: Map<string, string>;
}

/** A replica's `host:port` as `server.address` and `server.port` (port -1: none). */
interface HostParts {
  readonly address: string;
  readonly port: number;
}

/** Past this many entries a cache below starts over (slugs and replicas are few; a bound all the same). */
const CACHE_MAX = 1024;
const slugStrings = new Map<string, SlugStrings>();
const hostParts = new Map<string, HostParts>();
let slugBase = '';

function stringsOf(basePath: string, slug: string): SlugStrings {
  if (basePath !== slugBase || slugStrings.size >= CACHE_MAX) {
    slugStrings.clear();
    slugBase = basePath;
  }
  let s = slugStrings.get(slug);
  if (s === undefined) {
    s = { route: `${basePath}/${slug}/request/{path}`, prefix: `${basePath}/${slug}/request`, names: new Map() };
    slugStrings.set(slug, s);
  }
  return s;
}

function serverName(s: SlugStrings, method: string): string {
  let name = s.names.get(method);
  if (name === undefined) {
    name = `${method} ${s.route}`;
    if (s.names.size < 64) s.names.set(method, name);
  }
  return name;
}

function partsOf(host: string): HostParts {
  let parts = hostParts.get(host);
  if (parts === undefined) {
    const colon = host.lastIndexOf(':');
    const address = colon < 0 ? host : host.charCodeAt(0) === 0x5b ? host.slice(1, colon - 1) : host.slice(0, colon);
    parts = { address, port: colon < 0 ? -1 : Number(host.slice(colon + 1)) };
    if (hostParts.size >= CACHE_MAX) hostParts.clear();
    hostParts.set(host, parts);
  }
  return parts;
}

/** How a queued request left the queue, by its outcome. */
function queueExit(e: EndedSummary, granted: boolean): string {
  if (granted) return 'granted';
  switch (e.errorCode) {
    case 'queue_full':
      return 'displaced';
    case 'no_replica':
      return 'expired';
    case 'draining':
      return 'draining';
    default:
      return 'left';
  }
}

/** A refusal by a token's limits. */
function limitsRefused(e: EndedSummary): boolean {
  return e.errorCode === 'rate_limited' || e.errorCode === 'limits_unavailable';
}

/** An admission span: a limited token's, or a router's request (one refused before the relay: only by its limits). */
function hasAdmission(e: EndedSummary): boolean {
  return e.limited || limitsRefused(e) || (e.routedBy !== undefined && e.requestId !== '');
}

/** How many spans `writeSpans` makes of a finished trace (the export queue's bound counts spans). */
export function spanCount(t: RequestTrace): number {
  const e = t.ended!;
  return 1 + (hasAdmission(e) ? 1 : 0) + (e.queuedAt > 0 ? (t.coldStart ? 2 : 1) : 0) + t.attempts.length;
}

/** Writes the span tree of a finished trace (its recorder's `ended` set). */
export function writeSpans(t: RequestTrace, place: SpanPlace, w: SpanWriter): void {
  const e = t.ended!;
  const basePath = place.basePath;
  const traceId = t.traceId;
  const server = t.spanId;
  if (e.routed) {
    const strings = stringsOf(basePath, e.routedBy ?? e.slug);
    w.begin(traceId, server, t.parentSpanId, t.parentSpanId !== undefined, serverName(strings, e.method), SpanKind.SERVER, t.startedAt, t.endedAt);
    w.attr('http.request.method', e.method);
    w.attr('url.path', strings.prefix + e.path);
    w.attr('http.route', strings.route);
  } else {
    // Refused before it named a service: no route, and the span is named by its method (HTTP conventions).
    w.begin(traceId, server, t.parentSpanId, t.parentSpanId !== undefined, e.method, SpanKind.SERVER, t.startedAt, t.endedAt);
    w.attr('http.request.method', e.method);
    w.attr('url.path', e.path);
  }
  // A caller refused before it was authenticated has no token name.
  if (e.tokenName !== '') w.attr('sluice.token.name', e.tokenName);
  // A router's request refused before it was routed has no service yet; a refusal, no request id.
  if (e.slug !== '') w.attr('sluice.service', e.slug);
  if (e.requestId !== '') w.attr('sluice.request.id', e.requestId);
  if (e.routedBy !== undefined) w.attr('sluice.router', e.routedBy);
  // The caller got a status (499 only names a caller that left: none was sent then).
  if (e.outcome !== 'client_closed') w.attr('http.response.status_code', e.status);
  if (e.outcome !== 'ok') w.attr('error.type', e.outcome);
  if (t.operation !== undefined) {
    w.attr(GEN_AI.operation, t.operation);
    w.attr(GEN_AI.provider, place.provider);
    if (e.requestModel !== undefined) w.attr(GEN_AI.requestModel, e.requestModel);
    if (e.maxTokens !== undefined && e.maxTokens > 0) w.attr(GEN_AI.maxTokens, e.maxTokens);
    if (t.responseModel !== undefined) w.attr(GEN_AI.responseModel, t.responseModel);
    if (e.promptTokens >= 0) w.attr(GEN_AI.inputTokens, e.promptTokens);
    if (e.completionTokens >= 0) w.attr(GEN_AI.outputTokens, e.completionTokens);
    if (e.events > 0) w.attr(GEN_AI.timeToFirstChunk, (e.firstEventAt - t.startedAt) / 1000);
  }
  // First and last token: a stream's first and last events as written to the caller; an answer in one piece, its first byte.
  if (e.events > 0) {
    w.event('first token', e.firstEventAt);
    w.event('last token', e.lastEventAt, 'sluice.stream.events', e.events);
  } else if (e.firstByteAt > 0) {
    w.event('first byte', e.firstByteAt);
  }
  w.end(e.status >= 500 && e.outcome !== 'client_closed' ? e.outcome : undefined);

  // Admission: a limited token's decision, or a router's (or a tokensPerMinute token's) body read first.
  if (hasAdmission(e)) {
    const refused = limitsRefused(e);
    w.begin(traceId, newSpanId(), server, false, 'admission', SpanKind.INTERNAL, t.startedAt, t.admittedAt > 0 ? t.admittedAt : t.endedAt);
    w.attr('sluice.limited', e.limited || refused);
    if (refused) {
      w.attr('error.type', e.errorCode!);
      if (e.errorLimit !== undefined) w.attr('sluice.limit', e.errorLimit);
    }
    w.end(refused ? e.errorCode : undefined);
  }

  // The queue, and the cold start it waited on.
  if (e.queuedAt > 0) {
    const end = e.queuedAt + e.queuedMs;
    const exit = queueExit(e, t.attempts.some((attempt) => attempt.startedAt >= e.queuedAt));
    const queue = newSpanId();
    w.begin(traceId, queue, server, false, 'queue', SpanKind.INTERNAL, e.queuedAt, end);
    w.attr('sluice.queue.priority', e.priority);
    w.attr('sluice.queue.ahead', Math.max(0, t.queuedAhead));
    w.attr('sluice.queue.exit', exit);
    w.end(exit === 'granted' || exit === 'left' ? undefined : exit);
    if (t.coldStart) {
      w.begin(traceId, newSpanId(), queue, false, 'cold start', SpanKind.INTERNAL, e.queuedAt, end);
      w.attr('sluice.cold_start.waited_ms', e.queuedMs);
      if (t.coldExpectedMs >= 0) w.attr('sluice.cold_start.expected_ms', t.coldExpectedMs);
      w.end(undefined);
    }
  }

  // Each try on a replica: a CLIENT span.
  const attempts = t.attempts;
  for (let i = 0; i < attempts.length; i++) {
    const attempt = attempts[i]!;
    const name = t.operation === undefined ? e.method : e.requestModel === undefined ? t.operation : `${t.operation} ${e.requestModel}`;
    w.begin(traceId, attempt.spanId, server, false, name, SpanKind.CLIENT, attempt.startedAt, attempt.endedAt);
    w.attr('http.request.method', e.method);
    w.attr('sluice.retried', i > 0);
    if (attempt.host !== '') {
      const parts = partsOf(attempt.host);
      w.attr('server.address', parts.address);
      if (parts.port >= 0) w.attr('server.port', parts.port);
    }
    if (attempt.status > 0) w.attr('http.response.status_code', attempt.status);
    const failure = attempt.failed ?? (i === attempts.length - 1 && attempt.status === 0 && e.outcome !== 'ok' ? e.outcome : undefined);
    if (failure !== undefined) w.attr('error.type', failure);
    if (t.operation !== undefined) {
      w.attr(GEN_AI.operation, t.operation);
      w.attr(GEN_AI.provider, place.provider);
      if (e.requestModel !== undefined) w.attr(GEN_AI.requestModel, e.requestModel);
    }
    if (attempt.headAt > 0) w.event('status line', attempt.headAt, 'http.response.status_code', attempt.status);
    w.end(failure ?? (attempt.status >= 500 ? String(attempt.status) : undefined));
  }
}

// ── The SDK's spans (the OTLP/JSON exporter's input) ─────────────────────────────────────────────

/** What every span of a thread shares. */
export interface SpanOrigin extends SpanPlace {
  readonly resource: Resource;
  readonly scope: InstrumentationScope;
}

const NO_LINKS: never[] = [];
/** Read once: `performance.timeOrigin` is an accessor. */
const TIME_ORIGIN = performance.timeOrigin;

/** `performance.now()` of this thread as epoch [seconds, nanoseconds]. */
function hrTime(now: number): HrTime {
  const ms = TIME_ORIGIN + now;
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

/** One span as the SDK's exporters read it. */
class SpanRecord implements ReadableSpan {
  readonly startTime: HrTime;
  readonly endTime: HrTime;
  readonly duration: HrTime;
  readonly links = NO_LINKS;
  readonly ended = true;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  readonly attributes: Attributes = {};
  readonly events: TimedEvent[] = [];
  status = { code: SpanStatusCode.UNSET, message: undefined as string | undefined };
  private readonly context: SpanContext;

  constructor(
    origin: SpanOrigin,
    traceId: string,
    spanId: string,
    readonly parentSpanContext: SpanContext | undefined,
    readonly name: string,
    readonly kind: SpanKind,
    start: number,
    end: number,
    readonly resource: Resource = origin.resource,
    readonly instrumentationScope: InstrumentationScope = origin.scope,
  ) {
    this.context = { traceId, spanId, traceFlags: 1 };
    this.startTime = hrTime(start);
    this.endTime = hrTime(Math.max(start, end));
    const ms = Math.max(0, end - start);
    this.duration = [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];
  }

  spanContext(): SpanContext {
    return this.context;
  }
}

/** Collects a span tree as the SDK's `ReadableSpan`s. */
class ReadableSpans implements SpanWriter {
  readonly spans: ReadableSpan[] = [];
  private span: SpanRecord | undefined = undefined;

  constructor(private readonly origin: SpanOrigin) {}

  begin(traceId: string, spanId: string, parentSpanId: string | undefined, remoteParent: boolean, name: string, kind: SpanKind, start: number, end: number): void {
    const parent = parentSpanId === undefined ? undefined : { traceId, spanId: parentSpanId, traceFlags: 1, isRemote: remoteParent };
    this.span = new SpanRecord(this.origin, traceId, spanId, parent, name, kind, start, end);
  }

  attr(key: string, value: string | number | boolean): void {
    this.span!.attributes[key] = value;
  }

  event(name: string, at: number, key?: string, value?: number): void {
    this.span!.events.push(key === undefined ? { name, time: hrTime(at) } : { name, time: hrTime(at), attributes: { [key]: value } });
  }

  end(error: string | undefined): void {
    const span = this.span!;
    if (error !== undefined) span.status = { code: SpanStatusCode.ERROR, message: error };
    this.spans.push(span);
  }
}

/** The span trees of finished traces as the SDK's `ReadableSpan`s. */
export function spansOf(traces: readonly RequestTrace[], origin: SpanOrigin): ReadableSpan[] {
  const out = new ReadableSpans(origin);
  for (const t of traces) writeSpans(t, origin, out);
  return out.spans;
}
