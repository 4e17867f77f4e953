// An HTTP GET with one deadline for the whole exchange (connect, head and body), through node:http,
// for the control plane's readiness probes (control/sources/probe.ts). Off the hot path: a few
// closures and one timer per GET. Load readings, four a second per replica, use the upstream
// client instead (control/service/load-fetch.ts).
//
// - The deadline runs until the answer's body has ended or the request is destroyed, also after
//   the caller has settled on the head alone (a probe): then a body still arriving when it passes
//   is cut.
// - Never rejects: a request that cannot start, fails, closes or misses its deadline settles with
//   the caller's own result for that failure.
import { type Agent, type IncomingMessage, type OutgoingHttpHeaders, request } from 'node:http';
import { errorCode } from './error-code.js';

/** Why a GET got no answer to read: the deadline passed, it failed (`errorCode`), or closed first. */
export type GetFailure = { why: 'timeout' } | { why: 'failed'; code: string } | { why: 'closed' };

/** The caller's side of one GET's answer. */
export interface GetAnswer<T> {
  /** True once a result is decided (the first `settle` or failure wins). */
  readonly settled: boolean;
  /** Decides the result; the body may go on being read (or drained) within the deadline. */
  settle(result: T): void;
  /** Decides the result and destroys the request: nothing more of the answer is read. */
  stop(result: T): void;
}

/**
 * `GET url` through `agent` within `timeoutMs`. `read` gets the answer's head and decides the
 * result, at once or from the body; `failed` names the result of a failure.
 */
export function getWithDeadline<T>(
  agent: Agent,
  url: string,
  headers: OutgoingHttpHeaders,
  timeoutMs: number,
  read: (res: IncomingMessage, answer: GetAnswer<T>) => void,
  failed: (failure: GetFailure) => T,
): Promise<T> {
  return new Promise((resolve) => {
    let req: ReturnType<typeof request> | undefined;
    let timer: NodeJS.Timeout | undefined;
    const answer = {
      settled: false,
      settle(result: T): void {
        if (answer.settled) return;
        answer.settled = true;
        resolve(result);
      },
      stop(result: T): void {
        answer.settle(result);
        req?.destroy();
      },
    };
    const end = (): void => clearTimeout(timer);
    try {
      req = request(url, { agent, method: 'GET', headers }, (res) => {
        res.on('end', end);
        res.on('error', (err) => answer.settle(failed({ why: 'failed', code: errorCode(err) })));
        res.on('aborted', () => answer.settle(failed({ why: 'failed', code: 'aborted' })));
        read(res, answer);
      });
    } catch (err) {
      resolve(failed({ why: 'failed', code: errorCode(err) }));
      return;
    }
    timer = setTimeout(() => answer.stop(failed({ why: 'timeout' })), timeoutMs);
    timer.unref();
    req.on('error', (err) => {
      end();
      answer.settle(failed({ why: 'failed', code: errorCode(err) }));
    });
    req.on('close', () => {
      end();
      answer.settle(failed({ why: 'closed' }));
    });
    req.end();
  });
}
