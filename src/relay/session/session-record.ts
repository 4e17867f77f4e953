// The record of a finished realtime session, as the data plane forwards it to the counters, the
// limits and the log: its `session` line (docs/operations.md#the-session-line) with its duration,
// its messages and bytes each way, the close code the caller got and the usage its events reported.
import type { RelaySession } from './relay-session.js';
import { describeUpstreamError } from '../../upstream/errors.js';

/** Milliseconds to the microsecond. */
function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** The `session` log line of `s`, finished at `now` (`performance.now()`). */
export function sessionLine(s: RelaySession, now: number): Record<string, unknown> {
  const usage = s.usage;
  return {
    reqId: s.requestId,
    service: s.slug,
    router: s.routedBy,
    tokenName: s.token.name,
    path: s.path,
    status: s.status,
    outcome: s.outcome,
    ms: round(now - s.startedAt),
    queuedMs: s.queuedAt > 0 ? round(s.queuedMs) : undefined,
    openMs: s.openedAt > 0 ? round(now - s.openedAt) : undefined,
    messagesIn: s.messagesIn,
    messagesOut: s.messagesOut,
    bytesIn: s.bytesIn,
    bytesOut: s.bytesOut,
    closeCode: s.closeCode === 0 ? undefined : s.closeCode,
    closeReason: s.closeReason === '' ? undefined : s.closeReason,
    promptTokens: usage.reported ? usage.promptTokens : undefined,
    completionTokens: usage.reported ? usage.completionTokens : undefined,
    err: s.error?.cause === undefined ? undefined : describeUpstreamError(s.error.cause),
  };
}

/** The session ended as its caller or its replica closed it in order, or as its caller left. */
export function sessionFailed(s: RelaySession): boolean {
  return s.outcome !== 'ok' && s.outcome !== 'client_closed';
}
