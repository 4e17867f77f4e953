// The operations endpoints (contract section 9): /healthz, /readyz, /metrics. On the relay
// listener each data plane thread serves them; on the `admin` listener the main thread does.
// Either way they speak for the whole gateway: `draining` is the gateway's flag and the metrics
// text is rendered by the main thread from every thread's counters.
import type { TemplatedApp } from 'uWebSockets.js';
import type { Logger } from '../log.js';

export interface OpsSource {
  /** True once the gateway drains (every thread, every listener). */
  readonly draining: boolean;
  /** The Prometheus text of the whole gateway. */
  metrics(): Promise<{ text: string; contentType: string }>;
}

const JSON_OK = '{"status":"ok"}';

export function addOpsRoutes(app: TemplatedApp, ops: OpsSource, logger: Logger): void {
  for (const path of ['/healthz', '/readyz', '/metrics']) {
    app.head(path, (res) => {
      const status = path === '/readyz' && ops.draining ? '503 Service Unavailable' : '200 OK';
      res.cork(() => res.writeStatus(status).endWithoutBody());
    });
  }
  app.get('/healthz', (res) => {
    res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK));
  });
  app.get('/readyz', (res) => {
    res.cork(() => {
      if (ops.draining) {
        res.writeStatus('503 Service Unavailable').writeHeader('content-type', 'application/json').end('{"status":"draining"}');
      } else {
        res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK);
      }
    });
  });
  app.get('/metrics', (res) => {
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
