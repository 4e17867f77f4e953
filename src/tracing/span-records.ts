// A traced request's span tree, built from its recorder (request-trace.ts) when its batch is
// exported (span-export.ts), off the request path, as the OpenTelemetry SDK's `ReadableSpan`s that
// its OTLP exporters serialize:
//
//   SERVER  {method} {route}                   the request, arrival to end (events: first token, last token)
//   ├── INTERNAL admission                     a limited token's, or a router's request: until its gate opened
//   ├── INTERNAL queue                         waiting for a replica (priority, place, how it left)
//   │   └── INTERNAL cold start                the start it waited on (expected and actual)
//   └── CLIENT  {operation} {model} | {method} each try on a replica (event: status line); the
//                                              replica's traceparent names it
//
// Attributes follow the HTTP and GenAI semantic conventions (gen-ai.ts), plus `sluice.*`.
import { type Attributes, type HrTime, type SpanContext, SpanKind, SpanStatusCode, type SpanStatus } from '@opentelemetry/api';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';
import { GEN_AI } from './gen-ai.js';
import { newSpanId } from './trace-context.js';
import type { Attempt, EndedSummary, RequestTrace } from './request-trace.js';

type Resource = ReadableSpan['resource'];
type InstrumentationScope = ReadableSpan['instrumentationScope'];

/** What every span of a thread shares. */
export interface SpanOrigin {
  readonly resource: Resource;
  readonly scope: InstrumentationScope;
  /** The relay's path prefix (`basePath`), for `url.path` and the route. */
  readonly basePath: string;
}

const NO_LINKS: never[] = [];
const UNSET: SpanStatus = { code: SpanStatusCode.UNSET };

/** `performance.now()` of this thread as epoch [seconds, nanoseconds]. */
function hrTime(now: number): HrTime {
  const ms = performance.timeOrigin + now;
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

function duration(start: number, end: number): HrTime {
  const ms = Math.max(0, end - start);
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

/** One span, as the exporter reads it. */
class SpanRecord implements ReadableSpan {
  readonly startTime: HrTime;
  readonly endTime: HrTime;
  readonly duration: HrTime;
  readonly links = NO_LINKS;
  readonly ended = true;
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
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
    readonly attributes: Attributes,
    readonly status: SpanStatus = UNSET,
    readonly events: TimedEvent[] = [],
  ) {
    this.context = { traceId, spanId, traceFlags: 1 };
    this.startTime = hrTime(start);
    this.endTime = hrTime(Math.max(start, end));
    this.duration = duration(start, end);
    this.resource = origin.resource;
    this.instrumentationScope = origin.scope;
  }

  spanContext(): SpanContext {
    return this.context;
  }
}

function event(name: string, at: number, attributes?: Attributes): TimedEvent {
  return attributes === undefined ? { name, time: hrTime(at) } : { name, time: hrTime(at), attributes };
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

/** The span tree of a finished trace (its recorder's `ended` set). */
export function spansOf(t: RequestTrace, origin: SpanOrigin): ReadableSpan[] {
  const e = t.ended!;
  const traceId = t.traceId;
  const spans: ReadableSpan[] = [];
  const server: SpanContext = { traceId, spanId: t.spanId, traceFlags: 1 };
  const parent = t.parentSpanId === undefined ? undefined : { traceId, spanId: t.parentSpanId, traceFlags: 1, isRemote: true };
  const slug = e.routedBy ?? e.slug;
  const route = `${origin.basePath}/${slug}/request/{path}`;
  const attributes: Attributes = {
    'http.request.method': e.method,
    'url.path': `${origin.basePath}/${slug}/request${e.path}`,
    'http.route': route,
    'sluice.token.name': e.tokenName,
  };
  // A router's request refused before it was routed has no service yet; a refusal, no request id.
  if (e.slug !== '') attributes['sluice.service'] = e.slug;
  if (e.requestId !== '') attributes['sluice.request.id'] = e.requestId;
  if (e.routedBy !== undefined) attributes['sluice.router'] = e.routedBy;
  // The caller got a status (499 only names a caller that left: none was sent then).
  if (e.outcome !== 'client_closed') attributes['http.response.status_code'] = e.status;
  if (e.outcome !== 'ok') attributes['error.type'] = e.outcome;
  const events: TimedEvent[] = [];
  if (t.operation !== undefined) {
    attributes[GEN_AI.operation] = t.operation;
    if (e.requestModel !== undefined) attributes[GEN_AI.requestModel] = e.requestModel;
    if (e.maxTokens !== undefined && e.maxTokens > 0) attributes[GEN_AI.maxTokens] = e.maxTokens;
    if (t.responseModel !== undefined) attributes[GEN_AI.responseModel] = t.responseModel;
    if (e.promptTokens >= 0) attributes[GEN_AI.inputTokens] = e.promptTokens;
    if (e.completionTokens >= 0) attributes[GEN_AI.outputTokens] = e.completionTokens;
  }
  // First and last token: a stream's first and last events as written to the caller; an answer in one piece, its first byte.
  if (e.events > 0) {
    events.push(event('first token', e.firstEventAt), event('last token', e.lastEventAt, { 'sluice.stream.events': e.events }));
    if (t.operation !== undefined) attributes[GEN_AI.timeToFirstChunk] = (e.firstEventAt - t.startedAt) / 1000;
  } else if (e.firstByteAt > 0) {
    events.push(event('first byte', e.firstByteAt));
  }
  const failed = e.status >= 500 && e.outcome !== 'client_closed';
  const name = `${e.method} ${route}`;
  spans.push(new SpanRecord(origin, traceId, t.spanId, parent, name, SpanKind.SERVER, t.startedAt, t.endedAt, attributes, failed ? { code: SpanStatusCode.ERROR, message: e.outcome } : UNSET, events));

  // Admission: a limited token's decision, or a router's (or a tokensPerMinute token's) body read first.
  const refusedByLimits = e.errorCode === 'rate_limited' || e.errorCode === 'limits_unavailable';
  if (hasAdmission(e)) {
    const end = t.admittedAt > 0 ? t.admittedAt : t.endedAt;
    const a: Attributes = { 'sluice.limited': e.limited || refusedByLimits };
    if (refusedByLimits) {
      a['error.type'] = e.errorCode!;
      if (e.errorLimit !== undefined) a['sluice.limit'] = e.errorLimit;
    }
    spans.push(new SpanRecord(origin, traceId, newSpanId(), server, 'admission', SpanKind.INTERNAL, t.startedAt, end, a, refusedByLimits ? { code: SpanStatusCode.ERROR, message: e.errorCode! } : UNSET));
  }

  // The queue, and the cold start it waited on.
  if (e.queuedAt > 0) {
    const end = e.queuedAt + e.queuedMs;
    const granted = t.attempts.some((attempt) => attempt.startedAt >= e.queuedAt);
    const exit = queueExit(e, granted);
    const q: Attributes = { 'sluice.queue.priority': e.priority, 'sluice.queue.ahead': Math.max(0, t.queuedAhead), 'sluice.queue.exit': exit };
    const queueId = newSpanId();
    spans.push(new SpanRecord(origin, traceId, queueId, server, 'queue', SpanKind.INTERNAL, e.queuedAt, end, q, exit === 'granted' || exit === 'left' ? UNSET : { code: SpanStatusCode.ERROR, message: exit }));
    if (t.coldStart) {
      const c: Attributes = { 'sluice.cold_start.waited_ms': e.queuedMs };
      if (t.coldExpectedMs >= 0) c['sluice.cold_start.expected_ms'] = t.coldExpectedMs;
      spans.push(new SpanRecord(origin, traceId, newSpanId(), { traceId, spanId: queueId, traceFlags: 1 }, 'cold start', SpanKind.INTERNAL, e.queuedAt, end, c));
    }
  }

  t.attempts.forEach((attempt, i) => spans.push(attemptSpan(t, e, attempt, i, origin, server)));
  return spans;
}

function hasAdmission(e: EndedSummary): boolean {
  return e.limited || e.errorCode === 'rate_limited' || e.errorCode === 'limits_unavailable' || e.routedBy !== undefined;
}

/** How many spans `spansOf` makes of a finished trace (the export queue's bound counts spans). */
export function spanCount(t: RequestTrace): number {
  const e = t.ended!;
  return 1 + (hasAdmission(e) ? 1 : 0) + (e.queuedAt > 0 ? (t.coldStart ? 2 : 1) : 0) + t.attempts.length;
}

/** A CLIENT span: one try on a replica. */
function attemptSpan(t: RequestTrace, e: EndedSummary, attempt: Attempt, i: number, origin: SpanOrigin, server: SpanContext): ReadableSpan {
  const colon = attempt.host.lastIndexOf(':');
  const a: Attributes = { 'http.request.method': e.method, 'sluice.retried': i > 0 };
  if (attempt.host !== '') {
    a['server.address'] = colon < 0 ? attempt.host : attempt.host.slice(0, colon).replace(/^\[|\]$/g, '');
    if (colon >= 0) a['server.port'] = Number(attempt.host.slice(colon + 1));
  }
  if (attempt.status > 0) a['http.response.status_code'] = attempt.status;
  const failure = attempt.failed ?? (i === t.attempts.length - 1 && attempt.status === 0 && e.outcome !== 'ok' ? e.outcome : undefined);
  if (failure !== undefined) a['error.type'] = failure;
  let name = e.method;
  if (t.operation !== undefined) {
    a[GEN_AI.operation] = t.operation;
    if (e.requestModel !== undefined) a[GEN_AI.requestModel] = e.requestModel;
    name = e.requestModel === undefined ? t.operation : `${t.operation} ${e.requestModel}`;
  }
  const events = attempt.headAt > 0 ? [event('status line', attempt.headAt, { 'http.response.status_code': attempt.status })] : [];
  const failed = failure !== undefined || attempt.status >= 500;
  return new SpanRecord(origin, t.traceId, attempt.spanId, server, name, SpanKind.CLIENT, attempt.startedAt, attempt.endedAt, a, failed ? { code: SpanStatusCode.ERROR, message: failure ?? String(attempt.status) } : UNSET, events);
}
