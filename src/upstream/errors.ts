// Every way an upstream request can fail, mapped to a gateway error in one place. The original
// undici error is kept as `cause`. `retryable` marks failures where the replica never received
// a byte of the request (contract section 5: retried once on another ready replica).
import { RelayError } from '../errors.js';

/** Connection-level failures: the request never reached the replica. */
const NEVER_SENT = new Set([
  'ECONNREFUSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  // The replica's pool was closed (replica stopped) before the request was dispatched. Not
  // UND_ERR_DESTROYED: a destroyed pool also fails requests that were already written.
  'UND_ERR_CLOSED',
]);

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The gateway error for an upstream failure that happened before the replica's status line. */
export function upstreamFailure(err: unknown): RelayError {
  if (err instanceof RelayError) return err;
  const code = codeOf(err);
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    return new RelayError('upstream_timeout', { cause: err });
  }
  if (code !== undefined && NEVER_SENT.has(code)) {
    return new RelayError('upstream_unavailable', { cause: err, retryable: true });
  }
  // Reset, closed mid-request, a malformed response (llhttp HPE_*), a body length mismatch.
  return new RelayError('upstream_unavailable', { cause: err });
}

/** A short, token-free description of an upstream error for logs. */
export function describeUpstreamError(err: unknown): { code: string | undefined; message: string } {
  const cause = err instanceof RelayError ? err.cause : err;
  return { code: codeOf(cause), message: cause instanceof Error ? cause.message : String(cause) };
}
