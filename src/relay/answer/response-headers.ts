// The response-header policy (docs/api.md#what-the-caller-receives), as pure functions: what the
// caller gets of the replica's head, decided here as a proxy's response filter does. The upstream
// parser reports every field of the replica's final head and keeps its framing for itself
// (src/http/response-parser.ts); of those fields the caller gets the first Content-Type, and
// Content-Length only as the framing of its own answer (uWS writes it, or
// `Transfer-Encoding: chunked` when the replica sent none, with the body; a HEAD answer's is
// written here). Nothing else: no Set-Cookie, Server, Cache-Control, Content-Encoding, hop-by-hop
// fields. Sluice adds X-Request-Id and, while the caller is still uploading, `Connection: close`.
// What the replica receives is written by replica-request-head.ts; what Sluice reads from the
// caller, by headers.ts.
import { statusLine } from '../../http/status-line.js';
import { nameIs } from '../../http/syntax.js';

/** What the caller's answer keeps of the replica's head fields as they arrive (the request itself: no allocation). */
export interface ReturnedFields {
  /** The replica's first Content-Type; undefined before it, or without one. */
  answerContentType: string | undefined;
}

/**
 * One field of the replica's final head: name `buf[nameStart..nameEnd)` in any case, value
 * `buf[valueStart..valueEnd)` trimmed, valid only during the call. Keeps in `kept` what the
 * caller gets of it; clear `kept` before each attempt (a refused head reports fields too).
 */
export function returnField(kept: ReturnedFields, buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void {
  if (kept.answerContentType === undefined && nameIs(buf, nameStart, nameEnd, 'content-type')) kept.answerContentType = buf.toString('latin1', valueStart, valueEnd);
}

/** RFC 9110 section 6.4.1: an answer to HEAD, a 204 and a 304 have no body. */
export function bodylessAnswer(method: string, status: number): boolean {
  return method === 'HEAD' || status === 204 || status === 304;
}

/** Where the caller's head goes: uWS's HttpResponse, or a test's record. */
export interface HeadWriter {
  writeStatus(line: string): unknown;
  writeHeader(name: string, value: string): unknown;
}

/**
 * Writes the caller's status line and headers for the replica's answer: the replica's status with
 * its standard reason phrase, its Content-Type, X-Request-Id, `Connection: close` with
 * `closeAfter`, and for a bodyless answer other than 204 and 304 (a HEAD answer) the replica's
 * Content-Length (`contentLength`, -1 when absent). An answer with a body gets its framing from
 * uWS as its body is written: `contentLength` bytes, or chunked.
 */
export function writeReturnedHead(
  out: HeadWriter,
  status: number,
  contentType: string | undefined,
  contentLength: number,
  bodyless: boolean,
  requestId: string,
  closeAfter: boolean,
): void {
  out.writeStatus(statusLine(status));
  if (contentType !== undefined) out.writeHeader('content-type', contentType);
  out.writeHeader('x-request-id', requestId);
  if (closeAfter) out.writeHeader('connection', 'close');
  // Written by hand: uWS's endWithoutBody() writes none (and this uWS build aborts the process
  // when endWithoutBody is given a length).
  if (bodyless && contentLength >= 0 && status !== 204 && status !== 304) out.writeHeader('content-length', String(contentLength));
}
