// One reading's GET of a replica's Prometheus endpoint, its body handed to a MetricScanner chunk by
// chunk as it arrives (docs/configuration.md#the-model-servers-own-queue):
//
// - At most LOAD_READ_MAX_BYTES (1 MiB) of a body is read. A larger one fails the reading with
//   `larger than 1048576 bytes`: at once when its Content-Length says so, else when the byte past
//   the limit arrives; its socket is destroyed then and nothing more of it is read. A partial
//   exposition is not a reading: the series beyond the limit would be missing from the sums.
// - Each chunk is scanned in the turn that delivered it; nothing of the body is kept but what the
//   scanner carries (at most one short line).
// - Never rejects: a failure is a problem string (`status 500`, `ECONNRESET`, `no answer within
//   500 ms`, …) for the log and /status.
import { type Agent, request } from 'node:http';
import { LOAD_READ_MAX_BYTES } from '../../tunables.js';
import type { MetricScanner } from './metric-scanner.js';

export type ReadResult = { ok: true } | { ok: false; problem: string };

const TOO_LARGE: ReadResult = { ok: false, problem: `larger than ${LOAD_READ_MAX_BYTES} bytes` };

/** `GET url`, its body read into `scanner` (which the caller has reset); or why not. */
export function readExposition(agent: Agent, url: string, timeoutMs: number, scanner: MetricScanner): Promise<ReadResult> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: ReadResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    let req: ReturnType<typeof request>;
    try {
      req = request(url, { agent, method: 'GET', headers: { accept: 'text/plain;version=0.0.4, */*;q=0.1', 'accept-encoding': 'identity', 'user-agent': 'sluice-load' } }, (res) => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) {
          res.resume();
          done({ ok: false, problem: `status ${status}` });
          return;
        }
        const declared = Number(res.headers['content-length']);
        if (declared > LOAD_READ_MAX_BYTES) {
          done(TOO_LARGE);
          req.destroy();
          return;
        }
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          if (settled) return;
          bytes += chunk.length;
          if (bytes > LOAD_READ_MAX_BYTES) {
            done(TOO_LARGE);
            req.destroy();
            return;
          }
          scanner.write(chunk);
        });
        res.on('end', () => {
          if (settled) return;
          scanner.end();
          done({ ok: true });
        });
        res.on('error', (err) => done({ ok: false, problem: errorCode(err) }));
        res.on('aborted', () => done({ ok: false, problem: 'aborted' }));
      });
    } catch (err) {
      resolve({ ok: false, problem: errorCode(err) });
      return;
    }
    const timer = setTimeout(() => {
      done({ ok: false, problem: `no answer within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    timer.unref();
    req.on('error', (err) => done({ ok: false, problem: errorCode(err) }));
    req.on('close', () => done({ ok: false, problem: 'closed' }));
    req.end();
  });
}

function errorCode(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    if (err instanceof Error) return err.message;
  }
  return 'error';
}
