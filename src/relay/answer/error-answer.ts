// Sluice's own error as the caller gets it: status, JSON body, `X-Sluice-Error`, `X-Request-Id` and
// the error's extra headers, in one cork. Written by the relay's one writer (downstream.ts) and for
// a request refused before it is relayed (refusal.ts).
import type { HttpResponse } from 'uWebSockets.js';
import type { RelayError } from '../../http/errors.js';
import { statusLine } from '../../http/status-line.js';

/**
 * What becomes of the caller's connection after one of Sluice's own errors:
 * - `keep`: it serves the next request;
 * - `close`: closed as the error ends (a refusal from the head alone, its body unread);
 * - `closeLater`: the error says `Connection: close`, and the connection, no longer read, is left
 *   to uWS's idle timer (CallerBody.endUpload).
 */
export type AfterError = 'keep' | 'close' | 'closeLater';

/**
 * Writes one of Sluice's own errors and ends the response: status, JSON body, `X-Sluice-Error`,
 * `X-Request-Id` and the error's extra headers. A HEAD answer has no body (RFC 9110 section
 * 9.3.2): a body would desync the connection. (`end('')`, since this uWS build aborts the process
 * when endWithoutBody is given arguments.)
 */
export function writeError(res: HttpResponse, err: RelayError, requestId: string, after: AfterError, head: boolean): void {
  res.cork(() => {
    res.writeStatus(statusLine(err.status));
    res.writeHeader('content-type', 'application/json');
    res.writeHeader('x-sluice-error', err.code);
    res.writeHeader('x-request-id', requestId);
    if (err.headers !== undefined) for (const name in err.headers) res.writeHeader(name, err.headers[name]!);
    // uWS writes `Connection: close` itself when it closes at once.
    if (after === 'closeLater') res.writeHeader('connection', 'close');
    res.end(head ? '' : err.body(), after === 'close');
  });
}
