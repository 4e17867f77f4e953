
/** How long a caller refused while the gateway drains should wait before trying again (seconds). */
const DRAINING_RETRY_AFTER_S = 5;

// The one error type Sluice produces itself (docs/api.md#errors), and its JSON body.
// Errors relayed from a replica are not RelayErrors: they pass through untouched.

/**
 * Every code of Sluice's own errors: the one list that the type, the table below, the outcomes
 * and the request counters (metrics/request-counters.ts numbers them in this order) come from.
 */
const ERROR_CODES = [
  'client_closed',
  'upstream_error',
  'upstream_unavailable',
  'upstream_timeout',
  'payload_too_large',
  'queue_full',
  'no_replica',
  'draining',
  'internal_error',
  'bad_request',
  'invalid_path',
  'unauthorized',
  'not_found',
  'service_not_found',
  'method_not_allowed',
  'too_many_requests',
  'rate_limited',
  'model_not_found',
  'limits_unavailable',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** How a request ended, for logs and metrics: `ok`, or the code of the error it ended with. */
export type Outcome = 'ok' | ErrorCode;

/** Every outcome, `ok` first. */
export const OUTCOMES: readonly Outcome[] = ['ok', ...ERROR_CODES];

/** Who caused the error: the caller, the replica, or the gateway itself. */
export type ErrorSource = 'caller' | 'replica' | 'gateway';

/** Status, default message and source of every code, in one place. */
const CODES: Record<ErrorCode, { status: number; message: string; source: ErrorSource }> = {
  bad_request: { status: 400, message: 'The request is malformed.', source: 'caller' },
  invalid_path: { status: 400, message: 'The request path is not allowed.', source: 'caller' },
  unauthorized: { status: 401, message: 'A valid bearer token is required.', source: 'caller' },
  not_found: { status: 404, message: 'No such route.', source: 'caller' },
  service_not_found: { status: 404, message: 'No such service.', source: 'caller' },
  method_not_allowed: { status: 405, message: 'This method is not enabled for the service.', source: 'caller' },
  payload_too_large: { status: 413, message: 'The request body is larger than the service accepts.', source: 'caller' },
  too_many_requests: { status: 429, message: 'Too many failed authentication attempts; retry later.', source: 'caller' },
  model_not_found: { status: 404, message: 'No service of this router serves the model.', source: 'caller' },
  rate_limited: { status: 429, message: 'A limit of this token is reached; retry later.', source: 'caller' },
  // Not sent to anyone (the caller is gone); it names the outcome in logs and metrics.
  client_closed: { status: 499, message: 'The caller closed the connection.', source: 'caller' },
  upstream_unavailable: { status: 502, message: 'The service replica could not be reached.', source: 'replica' },
  // The replica failed after its status line was relayed; the caller sees a truncated body, not this.
  upstream_error: { status: 502, message: 'The service replica failed while answering.', source: 'replica' },
  queue_full: { status: 503, message: 'The service queue is full; retry later.', source: 'gateway' },
  no_replica: { status: 503, message: 'No replica of the service became ready in time.', source: 'gateway' },
  draining: { status: 503, message: 'The gateway is shutting down.', source: 'gateway' },
  limits_unavailable: { status: 503, message: 'The store of the limits per caller cannot be reached; retry later.', source: 'gateway' },
  upstream_timeout: { status: 504, message: 'The service replica did not answer in time.', source: 'replica' },
  internal_error: { status: 500, message: 'Internal gateway error.', source: 'gateway' },
};

export interface RelayErrorOptions {
  message?: string;
  cause?: unknown;
  /** Extra response headers (`Allow`, `Retry-After`, `WWW-Authenticate`). */
  headers?: Record<string, string>;
  /** True when the replica never received a byte, so the request may go to another replica. */
  retryable?: boolean;
  /** `rate_limited`: the limit that refused the request, named in the body as `limit`. */
  limit?: string;
}

export class RelayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly source: ErrorSource;
  readonly headers: Record<string, string> | undefined;
  readonly retryable: boolean;
  readonly limit: string | undefined;

  constructor(code: ErrorCode, options: RelayErrorOptions = {}) {
    const spec = CODES[code];
    super(options.message ?? spec.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RelayError';
    this.code = code;
    this.status = spec.status;
    this.source = spec.source;
    this.headers = options.headers;
    this.retryable = options.retryable ?? false;
    this.limit = options.limit;
  }

  /**
   * The JSON body sent to the caller: `{"error":{"code":…,"message":…}}` (and `limit` for
   * `rate_limited`); `model_not_found` in OpenAI's shape, which its SDKs read (docs/api.md#routers).
   */
  body(): string {
    if (this.code === 'model_not_found') return JSON.stringify({ error: { message: this.message, type: 'invalid_request_error', code: this.code } });
    if (this.limit !== undefined) return JSON.stringify({ error: { code: this.code, message: this.message, limit: this.limit } });
    return JSON.stringify({ error: { code: this.code, message: this.message } });
  }
}

/** `503 draining` with its `Retry-After`: a request that arrives, or still waits, while the gateway shuts down. */
export function drainingError(): RelayError {
  return new RelayError('draining', { headers: { 'retry-after': String(DRAINING_RETRY_AFTER_S) } });
}
