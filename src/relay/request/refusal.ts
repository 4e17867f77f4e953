// A request refused before it is relayed (a bad head, a wrong route or token, …): one of Sluice's
// own errors, a `request refused` log line, and the answer on the next turn of the event loop.
//
// Answering inside the uWS handler would let uWS go on to a request pipelined behind this one in
// the same packet (docs/architecture.md#fact-10), and where a refused request ends may be unknown
// (ambiguous framing), or uWS may have read it more leniently than a strict parser would
// (docs/security.md). uWS closes a connection that pipelines a request behind an unanswered one
// without running it, so nothing behind a refused request ever runs. A caller that sent nothing
// more gets the answer (and the connection closes if asked).
import type { HttpResponse } from 'uWebSockets.js';
import type { RelayError } from '../../http/errors.js';
import type { Logger } from '../../log/logger.js';
import { type AfterError, writeError } from '../answer/error-answer.js';
import type { RequestIds } from './request-ids.js';

export class Refusals {
  constructor(
    private readonly logger: Logger,
    private readonly ids: RequestIds,
  ) {}

  /** Refuses on the next turn of the event loop, the response still open until then. */
  refuse(res: HttpResponse, error: RelayError, closeConnection: boolean, service: string | undefined, head: boolean): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    setImmediate(() => {
      if (!aborted) this.answer(res, error, closeConnection ? 'close' : 'keep', service, head);
    });
  }

  /** Answers now (inside the uWS handler, or on the next turn) and logs it. */
  answer(res: HttpResponse, error: RelayError, after: AfterError, service: string | undefined, head: boolean): void {
    const id = this.ids.next();
    writeError(res, error, id, after, head);
    this.logger.info({ reqId: id, service, status: error.status, outcome: error.code, limit: error.limit }, 'request refused');
  }
}
