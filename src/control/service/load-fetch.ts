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
import type { Agent } from 'node:http';
import { type GetFailure, getWithDeadline } from '../../http/get.js';
import { LOAD_READ_MAX_BYTES } from '../../tunables.js';
import type { MetricScanner } from './metric-scanner.js';

export type ReadResult = { ok: true } | { ok: false; problem: string };

const TOO_LARGE: ReadResult = { ok: false, problem: `larger than ${LOAD_READ_MAX_BYTES} bytes` };

const HEADERS = { accept: 'text/plain;version=0.0.4, */*;q=0.1', 'accept-encoding': 'identity', 'user-agent': 'sluice-load' };

/** `GET url`, its body read into `scanner` (which the caller has reset); or why not. */
export function readExposition(agent: Agent, url: string, timeoutMs: number, scanner: MetricScanner): Promise<ReadResult> {
  return getWithDeadline<ReadResult>(
    agent,
    url,
    HEADERS,
    timeoutMs,
    (res, answer) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        res.resume();
        answer.settle({ ok: false, problem: `status ${status}` });
        return;
      }
      const declared = Number(res.headers['content-length']);
      if (declared > LOAD_READ_MAX_BYTES) {
        answer.stop(TOO_LARGE);
        return;
      }
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        if (answer.settled) return;
        bytes += chunk.length;
        if (bytes > LOAD_READ_MAX_BYTES) {
          answer.stop(TOO_LARGE);
          return;
        }
        scanner.write(chunk);
      });
      res.on('end', () => {
        if (answer.settled) return;
        scanner.end();
        answer.settle({ ok: true });
      });
    },
    (failure) => ({ ok: false, problem: problemOf(failure, timeoutMs) }),
  );
}

/** The words of a failed reading (docs/configuration.md#the-model-servers-own-queue). */
function problemOf(failure: GetFailure, timeoutMs: number): string {
  if (failure.why === 'timeout') return `no answer within ${timeoutMs} ms`;
  return failure.why === 'closed' ? 'closed' : failure.code;
}
