// API errors: what to log about them (a status code and the API server's reason, never a header,
// URL credential or token), when to try again (exponential backoff with jitter), and logging once
// per kind of call: the first failure is a warning, repeats are debug lines, and the first success
// after failures is one info line with how long it lasted. A gateway that cannot reach the API
// server for an hour writes two lines per kind of call, not one per request or retry.
import { type ConfigurationOptions, Observable, type RequestContext, type ResponseContext } from '@kubernetes/client-node';
import type { Logger } from '../../../log/logger.js';
import { backoffMs } from '../../../time/backoff.js';

/** What a failed API call says about itself, safe to log. */
export interface ApiFailure {
  /** HTTP status (409, 410, 503…), or undefined when no answer came (refused, reset, timeout). */
  status: number | undefined;
  /** The Status reason (`Conflict`, `Expired`) or the network error code (`ECONNREFUSED`). */
  reason: string;
  /** The Status message, cut to 200 characters (no headers, no request). */
  message: string | undefined;
}

export function describeApiError(err: unknown): ApiFailure {
  if (typeof err !== 'object' || err === null) return { status: undefined, reason: 'error', message: undefined };
  const e = err as { code?: unknown; statusCode?: unknown; body?: unknown; name?: unknown; type?: unknown; errno?: unknown; cause?: unknown };
  // ApiException (generated client): `code` is the HTTP status, `body` the Status (object or text).
  // Watch errors: `statusCode`. Network errors (node-fetch FetchError): `code` is `ECONNREFUSED`…
  const status = typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  if (status !== undefined) {
    let body: unknown = e.body;
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body);
      } catch {
        body = undefined;
      }
    }
    const s = (body ?? {}) as { reason?: unknown; message?: unknown };
    return {
      status,
      reason: typeof s.reason === 'string' ? s.reason : String(status),
      message: typeof s.message === 'string' ? s.message.slice(0, 200) : undefined,
    };
  }
  // No answer: the error's own message (the client's and node-fetch's name the URL, never a header).
  const message = err instanceof Error ? err.message.slice(0, 200) : undefined;
  if (typeof e.code === 'string') return { status: undefined, reason: e.code, message };
  if (e.cause !== undefined && e.cause !== err) return describeApiError(e.cause);
  if (e.name === 'AbortError' || e.type === 'aborted') return { status: undefined, reason: 'aborted', message };
  return { status: undefined, reason: typeof e.name === 'string' ? e.name : 'error', message };
}

/** The status of an API error (undefined when no answer came). */
export function statusOf(err: unknown): number | undefined {
  return describeApiError(err).status;
}

export interface BackoffTuning {
  /** First retry delay; doubles per consecutive failure. */
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** Statuses that a retry will not cure by itself. */
const PERMANENT = new Set([401, 403, 404]);
const HINT = 'check the credentials, the Role (docs/kubernetes.md#the-role) and replicas.kubernetes (namespace, deployment, service)';

/** Per kind of call (`watch`, `scale`, `lease`): consecutive failures, backoff, and log-once. */
export class ApiTrouble {
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(
    private readonly log: Logger,
    private readonly context: Record<string, unknown>,
    private readonly tuning: BackoffTuning,
  ) {}

  /** Records a failure of `call`; logs it the first time; returns the delay before the next try. */
  failed(call: string, err: unknown): number {
    const failure = describeApiError(err);
    let entry = this.failures.get(call);
    if (entry === undefined) {
      entry = { count: 0, since: Date.now() };
      this.failures.set(call, entry);
    }
    entry.count++;
    const line = { ...this.context, call, status: failure.status, reason: failure.reason, message: failure.message, failures: entry.count };
    if (entry.count > 1) this.log.debug(line, 'kubernetes API call failed again');
    else if (failure.status !== undefined && PERMANENT.has(failure.status)) {
      // Not a passing outage: the credentials, the Role or the names in the config are wrong.
      this.log.error({ ...line, hint: HINT }, 'kubernetes API call refused; retrying with backoff');
    } else this.log.warn(line, 'kubernetes API call failed; retrying with backoff');
    return this.delay(entry.count);
  }

  /** Records a success of `call`; logs the recovery once if it had failed. */
  succeeded(call: string): void {
    const entry = this.failures.get(call);
    if (entry === undefined) return;
    this.failures.delete(call);
    this.log.info({ ...this.context, call, failures: entry.count, ms: Date.now() - entry.since }, 'kubernetes API call recovered');
  }

  /**
   * The caller stops retrying `call` without a success (a scale-up no request waits for any more):
   * one info line if it had failed, and the next failure is a first failure again (a warning, the
   * backoff from its base).
   */
  abandoned(call: string): void {
    const entry = this.failures.get(call);
    if (entry === undefined) return;
    this.failures.delete(call);
    this.log.info({ ...this.context, call, failures: entry.count, ms: Date.now() - entry.since }, 'kubernetes API call given up; nothing needs it now');
  }

  /** Consecutive failures of `call` so far. */
  count(call: string): number {
    return this.failures.get(call)?.count ?? 0;
  }

  private delay(count: number): number {
    const base = backoffMs(this.tuning.backoffBaseMs, this.tuning.backoffMaxMs, count);
    // ±20% so that N gateways that lost the API server together do not retry in lockstep.
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }
}

/** A promise that resolves after `ms` (or at once when `signal` aborts). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/**
 * Per-call options for the generated API clients: a deadline on every call (the client sets none,
 * so a black-holed API server would hold a scale-up for minutes), and optionally a Content-Type
 * (a PATCH is sent as JSON Patch unless told otherwise, fact 15).
 */
export function callOptions(timeoutMs: number, contentType?: string): ConfigurationOptions {
  return {
    middleware: [
      {
        pre(context: RequestContext): Observable<RequestContext> {
          context.setSignal(AbortSignal.timeout(timeoutMs));
          if (contentType !== undefined) context.setHeaderParam('Content-Type', contentType);
          return new Observable(Promise.resolve(context));
        },
        post(context: ResponseContext): Observable<ResponseContext> {
          return new Observable(Promise.resolve(context));
        },
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}
