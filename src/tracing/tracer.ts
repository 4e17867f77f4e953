// One data plane thread's tracing (docs/operations.md#traces), present only while tracing is on:
// the sampling decision for each request that passes the request filter, and the export of the
// traces that end. With tracing off the data plane has no Tracer and the relay's hooks each test
// one field; a request that is not sampled costs the decision and nothing else (no allocation: a
// caller's header is looked at in place; its context then goes to the replica as it came).
//
// Sampling, as OpenTelemetry's samplers decide (config/tracing-config.ts names them):
// - parent-based, with a caller's valid `traceparent`: its sampled flag decides;
// - otherwise `ratio` decides: always (1), never (0), or by the trace id (a caller's), or by a
//   random draw for a new trace (its id is drawn only once it is sampled).
import { readFileSync } from 'node:fs';
import type { Logger } from '../log/logger.js';
import { operationOf } from './gen-ai.js';
import { type EndedRequest, type EndedRecord, RequestTrace, type TraceSink } from './request-trace.js';
import { SpanExport, type SpanCounts } from './span-export.js';
import { newTraceId, sampledFlag, validTraceparent } from './trace-context.js';
import type { TracingSettings } from '../config/tracing-config.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** 2^52: the trace id's last 13 hex digits as a fraction. */
const ID_RANGE = 2 ** 52;

export class Tracer implements TraceSink {
  private readonly spans: SpanExport;

  constructor(
    readonly settings: TracingSettings,
    basePath: string,
    counts: SpanCounts,
    logger: Logger,
  ) {
    this.spans = new SpanExport(settings, basePath, VERSION, counts, logger);
  }

  /**
   * The recorder of a request that is sampled, or undefined. `path`: `{path}` after the service's
   * prefix (it says whether the request is OpenAI-style).
   */
  begin(traceparent: string | undefined, tracestate: string | undefined, startedAt: number, path: string): RequestTrace | undefined {
    const { parentBased, ratio } = this.settings.sampler;
    if (traceparent !== undefined && validTraceparent(traceparent)) {
      if (parentBased ? !sampledFlag(traceparent) : !(ratio >= 1 || (ratio > 0 && parseInt(traceparent.slice(22, 35), 16) / ID_RANGE < ratio))) return undefined;
      return new RequestTrace(this, traceparent.slice(3, 35), traceparent.slice(36, 52), tracestate, startedAt, operationOf(path));
    }
    if (!(ratio >= 1 || (ratio > 0 && Math.random() < ratio))) return undefined;
    return new RequestTrace(this, newTraceId(), undefined, undefined, startedAt, operationOf(path));
  }

  /** A traced request ended: its spans wait for export. */
  finished(trace: RequestTrace): void {
    this.spans.add(trace);
  }

  /**
   * A request refused in the request filter (it never became a relayed request: its token's
   * limits, authentication, a bad request, an unknown service, …): a SERVER span, and its
   * admission when its limits refused it, when it is sampled.
   */
  refused(r: Omit<EndedRequest, 'fields' | 'stream' | 'downstream' | 'queuedAt' | 'queuedMs' | 'limit'>, status: number, traceparent: string | undefined, tracestate: string | undefined, startedAt: number): void {
    // One that named no service is not OpenAI-style, whatever its path ends with.
    const trace = this.begin(traceparent, tracestate, startedAt, r.routed === false ? '' : r.path);
    if (trace === undefined) return;
    const ended: EndedRequest = { ...r, queuedAt: 0, queuedMs: 0, limit: undefined, stream: undefined, downstream: { firstByteAt: 0, answered: false }, fields: undefined };
    const record: EndedRecord = { status, outcome: r.error?.code ?? 'ok', ms: performance.now() - startedAt, promptTokens: 0, completionTokens: 0, usageReported: false };
    trace.finish(ended, record);
  }

  /** Sends what is queued (bounded) and stops. */
  close(): Promise<void> {
    return this.spans.close();
  }
}
