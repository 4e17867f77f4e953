// Every way an upstream exchange can fail, mapped to a gateway error in one place. The original
// error (a socket error such as ECONNRESET, or an UpstreamError naming what went wrong) is kept
// as `cause`. `retryable` marks failures where the replica cannot have received a byte of the
// request — the connection was never established — so the relay may send the request once to
// another ready replica (docs/api.md#errors). A reset on a connection that was established
// (even a reused one) is never retried: bytes may have reached the replica.
import { RelayError } from '../http/errors.js';
import { errorCode } from '../http/error-code.js';

/** What went wrong on the upstream side when there is no socket error to name it. */
export type UpstreamErrorCode =
  | 'UPSTREAM_CONNECT_TIMEOUT'
  | 'UPSTREAM_HEADERS_TIMEOUT'
  | 'UPSTREAM_BODY_TIMEOUT'
  | 'UPSTREAM_MALFORMED'
  | 'UPSTREAM_CLOSED'
  | 'UPSTREAM_POOL_CLOSED';

export class UpstreamError extends Error {
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'UpstreamError';
  }
}

/** The TCP connect failed (refused, unreachable, DNS): the replica received nothing. */
export function connectFailed(cause: Error): RelayError {
  return new RelayError('upstream_unavailable', { cause, retryable: true });
}

/** The TCP connect did not complete in time: the replica received nothing. */
export function connectTimedOut(ms: number): RelayError {
  return new RelayError('upstream_unavailable', {
    cause: new UpstreamError('UPSTREAM_CONNECT_TIMEOUT', `connect did not complete within ${ms} ms`),
    retryable: true,
  });
}

/** The replica's pool was closed (the replica stopped) before the request was written. */
export function poolClosed(): RelayError {
  return new RelayError('upstream_unavailable', {
    cause: new UpstreamError('UPSTREAM_POOL_CLOSED', 'the replica was stopped before the request was sent'),
    retryable: true,
  });
}

/** No status line within `timeouts.responseHeadersMs` after the request was written: 504. */
export function headersTimedOut(ms: number): RelayError {
  return new RelayError('upstream_timeout', {
    cause: new UpstreamError('UPSTREAM_HEADERS_TIMEOUT', `no status line within ${ms} ms`),
  });
}

/** No body bytes within `timeouts.bodyIdleMs`: the answer is truncated (or 502 if nothing was relayed). */
export function bodyTimedOut(ms: number): RelayError {
  return new RelayError('upstream_unavailable', {
    cause: new UpstreamError('UPSTREAM_BODY_TIMEOUT', `no body bytes within ${ms} ms`),
  });
}

/** The response was refused by the parser (docs/architecture.md#fact-13). */
export function malformedResponse(reason: string): RelayError {
  return new RelayError('upstream_unavailable', {
    cause: new UpstreamError('UPSTREAM_MALFORMED', `malformed response: ${reason}`),
  });
}

/** The connection was reset or closed during the exchange (after it was established). */
export function connectionLost(cause: Error | string): RelayError {
  return new RelayError('upstream_unavailable', {
    cause: typeof cause === 'string' ? new UpstreamError('UPSTREAM_CLOSED', cause) : cause,
  });
}

/**
 * What a failure before the replica's status line says about the replica (not retryable ones;
 * a retryable one never reached it: `unreachable`): `timeout` for the status-line deadline,
 * `reset` for a connection closed or reset under the request, `failed` otherwise (a malformed
 * answer). The first two count toward ejecting the replica (src/control/service/ejections.ts).
 */
export function faultBeforeHead(error: RelayError): 'reset' | 'timeout' | 'failed' {
  const cause = error.cause;
  if (cause instanceof UpstreamError) return cause.code === 'UPSTREAM_HEADERS_TIMEOUT' ? 'timeout' : cause.code === 'UPSTREAM_CLOSED' ? 'reset' : 'failed';
  // connectionLost with the socket's own error (ECONNRESET, EPIPE): the connection was established.
  return error.code === 'upstream_unavailable' && cause instanceof Error ? 'reset' : 'failed';
}

/**
 * A short, token-free description of an upstream error for logs (the access line's `err`): its
 * kind (`UpstreamError`, or `Error` for a socket's error), its message and its code (errorCode).
 */
export function describeUpstreamError(err: unknown): { type: string; message: string; code: string } {
  const cause = err instanceof RelayError ? err.cause : err;
  return cause instanceof Error ? { type: cause.name, message: cause.message, code: errorCode(cause) } : { type: typeof cause, message: String(cause), code: errorCode(cause) };
}
