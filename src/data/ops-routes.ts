// The operations endpoints (contract section 9): /healthz, /readyz, /metrics. On the relay
// listener each data plane thread serves them; on the `admin` listener the main thread does.
// Either way they speak for the whole gateway: `draining` is the gateway's flag and the metrics
// text is rendered by the main thread from every thread's counters.
import { randomBytes } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { RelayError } from '../errors.js';
import type { Logger } from '../log.js';
import { writeError } from '../relay/downstream.js';
import { readCallerHeaders } from '../relay/headers.js';
import { checkRequestHead } from '../relay/caller-head-checks.js';

export interface OpsSource {
  /** True once the gateway drains (every thread, every listener). */
  readonly draining: boolean;
  /** The Prometheus text of the whole gateway. */
  metrics(): Promise<{ text: string; contentType: string }>;
}

const JSON_OK = '{"status":"ok"}';
const NO_FORWARD: ReadonlySet<string> = new Set();

/** Answers a refused request on the next turn of the event loop (front-end.ts `refuse`). */
export type Refuse = (res: HttpResponse, error: RelayError, closeConnection: boolean, head: boolean) => void;

/** A `Refuse` for a listener without a front end (the admin listener): same answer, same log line. */
export function refusal(logger: Logger): Refuse {
  const prefix = randomBytes(6).toString('hex');
  let counter = 0;
  return (res, error, closeConnection, head) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    setImmediate(() => {
      if (aborted) return;
      const id = `${prefix}-${(++counter).toString(36)}`;
      writeError(res, error, id, closeConnection ? 'close' : 'keep', head);
      logger.info({ reqId: id, status: error.status, outcome: error.code }, 'request refused');
    });
  };
}

/**
 * The operations endpoints answer without reading a body: a request to one with ambiguous
 * framing or malformed headers is refused like a relay request, so nothing hides behind it.
 */
function refusedOpsRequest(res: HttpResponse, req: HttpRequest, head: boolean, refuse: Refuse): boolean {
  const framing = checkRequestHead(readCallerHeaders(req, NO_FORWARD), req.getCaseSensitiveMethod(), req.getUrl(), req.getQuery());
  if (framing === 0) return false;
  // A body on an operations request is not read either: answer and close.
  const error = typeof framing === 'number' ? new RelayError('bad_request', { message: 'The operations endpoints take no request body.' }) : framing;
  refuse(res, error, true, head);
  return true;
}

export function addOpsRoutes(app: TemplatedApp, ops: OpsSource, logger: Logger, refuse: Refuse): void {
  for (const path of ['/healthz', '/readyz', '/metrics']) {
    app.head(path, (res, req) => {
      if (refusedOpsRequest(res, req, true, refuse)) return;
      const status = path === '/readyz' && ops.draining ? '503 Service Unavailable' : '200 OK';
      res.cork(() => res.writeStatus(status).endWithoutBody());
    });
  }
  app.get('/healthz', (res, req) => {
    if (refusedOpsRequest(res, req, false, refuse)) return;
    res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK));
  });
  app.get('/readyz', (res, req) => {
    if (refusedOpsRequest(res, req, false, refuse)) return;
    res.cork(() => {
      if (ops.draining) {
        res.writeStatus('503 Service Unavailable').writeHeader('content-type', 'application/json').end('{"status":"draining"}');
      } else {
        res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK);
      }
    });
  });
  app.get('/metrics', (res, req) => {
    if (refusedOpsRequest(res, req, false, refuse)) return;
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
