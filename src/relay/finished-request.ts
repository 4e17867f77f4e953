// The record of a finished request: what the caller got (status, outcome, time to first byte, bytes)
// and what the access line says of it, read once from the request's state when it is over. The data
// plane forwards it to the counters and the access log and knows nothing of how it was found.
import type { AccessLine } from '../log/access-log.js';
import { describeUpstreamError } from '../upstream/errors.js';
import type { Outcome } from '../http/errors.js';
import type { RelayRequest } from './relay.js';

export interface FinishedRequest {
  slug: string;
  /** The status the caller got: the replica's, Sluice's own error's, or 499 when it went away. */
  status: number;
  outcome: Outcome;
  /** Not `ok` and not the caller's own leaving: logged at `warn`. */
  failed: boolean;
  bytesIn: number;
  bytesOut: number;
  /** From the request's arrival to the first byte of the answer written, ms; -1 without one. */
  ttfbMs: number;
  /** From the arrival to the end, ms. */
  ms: number;
  /** LLM tokens counted (docs/operations.md#llm-token-usage): reported by the answer, or a stream's data events; 0 without. */
  promptTokens: number;
  completionTokens: number;
  /** The answer reported its usage (the counts above are its own). */
  usageReported: boolean;
}

/** The record of `r`, finished at `now` (`performance.now()`). */
export function finishedRequest(r: RelayRequest, now: number): FinishedRequest {
  const d = r.downstream;
  const outcome = r.outcome;
  const usage = r.usage;
  return {
    slug: r.slug,
    status: outcome === 'client_closed' ? 499 : d.answered ? d.statusCode : (r.error?.status ?? 500),
    outcome,
    failed: outcome !== 'ok' && outcome !== 'client_closed',
    bytesIn: r.body.received,
    bytesOut: d.bytesOut,
    ttfbMs: d.firstByteAt > 0 ? d.firstByteAt - r.startedAt : -1,
    ms: now - r.startedAt,
    promptTokens: usage !== undefined && usage.reported ? usage.promptTokens : 0,
    completionTokens: usage !== undefined && usage.reported ? usage.completionTokens : r.stream === undefined ? 0 : r.stream.completionEvents,
    usageReported: usage !== undefined && usage.reported,
  };
}

/** The access-log line of a finished request. */
export function accessLine(r: RelayRequest, f: FinishedRequest): AccessLine {
  const stream = r.stream;
  return {
    reqId: r.requestId,
    service: f.slug,
    router: r.routedBy,
    tokenName: r.token.name,
    method: r.method,
    path: r.path,
    status: f.status,
    outcome: f.outcome,
    bytesIn: f.bytesIn,
    bytesOut: f.bytesOut,
    heldBytes: r.body.heldBytes >= 0 ? r.body.heldBytes : undefined,
    ttfbMs: f.ttfbMs >= 0 ? round(f.ttfbMs) : undefined,
    ms: round(f.ms),
    queuedMs: r.queuedAt > 0 ? round(r.queuedMs) : undefined,
    retried: r.retried || undefined,
    keptAlive: r.downstream.keptAlive || undefined,
    events: stream?.events,
    firstEventMs: stream === undefined || stream.events === 0 ? undefined : round(stream.firstEventMs),
    maxGapMs: stream === undefined || stream.events < 2 ? undefined : round(stream.maxGapMs),
    promptTokens: f.usageReported ? f.promptTokens : undefined,
    completionTokens: f.usageReported ? f.completionTokens : undefined,
    err: r.error?.cause === undefined ? undefined : describeUpstreamError(r.error.cause),
  };
}

/** Milliseconds to the microsecond. */
function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * The tokens a finished request of a limited token settles with: what its answer reported (prompt
 * plus completion tokens: a JSON answer's `usage`, a stream's last `usage`), or a stream's data
 * events when it reported none (`finishedRequest` above). A complete answer with neither settles with
 * its reservation; a request whose caller left or whose replica failed before any of it was
 * counted gives its reservation back (docs/api.md#limits-per-caller).
 */
export function settledTokens(r: RelayRequest, f: FinishedRequest): number {
  if (f.usageReported || f.completionTokens > 0) return f.promptTokens + f.completionTokens;
  return f.outcome === 'ok' ? r.reserved : 0;
}
