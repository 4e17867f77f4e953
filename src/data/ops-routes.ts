// The operations endpoints (docs/operations.md#operations-endpoints): /healthz, /readyz, /metrics. On the relay
// listener each data plane thread serves them; on the `admin` listener the main thread does.
// Either way they speak for the whole gateway: `ready` and `draining` are the gateway's flags and
// the metrics text is rendered by the main thread from every thread's counters.
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { RelayError } from '../http/errors.js';
import type { Logger } from '../log/logger.js';
import { checkRequestHead } from '../relay/request/caller-head-checks.js';
import { readCallerHeaders } from '../relay/request/headers.js';
import type { Refusals } from '../relay/request/refusal.js';

export interface OpsSource {
  /**
   * True once every thread of the gateway listens (it logs `gateway listening` then): until then a
   * ready answer would send callers' connections to the threads that listen already, and keep
   * them there (docs/operations.md#operations-endpoints).
   */
  readonly ready: boolean;
  /** True once the gateway drains (every thread, every listener). */
  readonly draining: boolean;
  /** The Prometheus text of the whole gateway. */
  metrics(): Promise<{ text: string; contentType: string }>;
}

const JSON_OK = '{"status":"ok"}';
const JSON_STARTING = '{"status":"starting"}';
const JSON_DRAINING = '{"status":"draining"}';
const NO_FORWARD: ReadonlySet<string> = new Set();

/**
 * The operations endpoints answer without reading a body: a request to one with ambiguous
 * framing or malformed headers is refused like a relay request, so nothing hides behind it.
 */
export function refusedOpsRequest(res: HttpResponse, req: HttpRequest, head: boolean, refusals: Refusals): boolean {
  const framing = checkRequestHead(readCallerHeaders(req, NO_FORWARD), req.getCaseSensitiveMethod(), req.getUrl(), req.getQuery());
  if (framing === 0) return false;
  // A body on an operations request is not read either: answer and close.
  const error = typeof framing === 'number' ? new RelayError('bad_request', { message: 'The operations endpoints take no request body.' }) : framing;
  refusals.refuse(res, error, true, undefined, head);
  return true;
}

export function addOpsRoutes(app: TemplatedApp, ops: OpsSource, logger: Logger, refusals: Refusals): void {
  for (const path of ['/healthz', '/readyz', '/metrics']) {
    app.head(path, (res, req) => {
      if (refusedOpsRequest(res, req, true, refusals)) return;
      const status = path === '/readyz' && (ops.draining || !ops.ready) ? '503 Service Unavailable' : '200 OK';
      res.cork(() => res.writeStatus(status).endWithoutBody());
    });
  }
  app.get('/healthz', (res, req) => {
    if (refusedOpsRequest(res, req, false, refusals)) return;
    res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK));
  });
  app.get('/readyz', (res, req) => {
    if (refusedOpsRequest(res, req, false, refusals)) return;
    const answer = ops.draining ? JSON_DRAINING : ops.ready ? JSON_OK : JSON_STARTING;
    res.cork(() => {
      res.writeStatus(answer === JSON_OK ? '200 OK' : '503 Service Unavailable').writeHeader('content-type', 'application/json').end(answer);
    });
  });
  app.get('/metrics', (res, req) => {
    if (refusedOpsRequest(res, req, false, refusals)) return;
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    ops.metrics().then(
      ({ text, contentType }) => {
        if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', contentType).end(text));
      },
      (err: unknown) => {
        logger.error({ err }, 'metrics failed');
        if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
      },
    );
  });
}
