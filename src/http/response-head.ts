// The fields of a replica's head that the response parser reads for itself: the ones that frame
// the body and decide whether the connection carries another exchange (Content-Length,
// Transfer-Encoding, Connection, Keep-Alive), and the framing they give or why they are refused
// (docs/architecture.md#fact-13). Framing is the upstream's job; every field, these included, is
// also reported to the request (ResponseSink.onResponseField), and what the caller gets of them is
// the relay's decision (src/relay/answer/response-headers.ts).
import {
  CONNECTION_CLOSE,
  CONNECTION_KEEP_ALIVE,
  connectionOptions,
  contentLengthValue,
  hasTab,
  keepAliveTimeout,
  nameIs,
} from './syntax.js';

/** How the body of the answer is delimited (for tests and logs). */
export type Framing = 'none' | 'length' | 'chunked' | 'close';

/** One head's framing and connection fields; `start` before each head (1xx ones included). */
export class FramingFields {
  /** The head's status line says HTTP/1.0. */
  http10 = false;
  /** Content-Length, -1 when absent. */
  contentLength = -1;
  /** A single `Transfer-Encoding: chunked` (checked by `problem`). */
  chunked = false;
  /** The replica's `Keep-Alive: timeout=N`, in seconds; -1 when absent. */
  keepAliveTimeout = -1;
  private transferEncoding = 0;
  private connectionClose = false;
  private connectionKeepAlive = false;

  start(http10: boolean): void {
    this.http10 = http10;
    this.contentLength = -1;
    this.chunked = false;
    this.keepAliveTimeout = -1;
    this.transferEncoding = 0;
    this.connectionClose = false;
    this.connectionKeepAlive = false;
  }

  /**
   * Reads the field `buf[nameStart..nameEnd)`, its value trimmed to `buf[valueStart..valueEnd)`
   * (`lineEnd`: the line's end, for the bytes trimmed after the value) if it is one of the four;
   * returns why it is refused, or undefined.
   */
  read(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number, lineEnd: number): string | undefined {
    switch (nameEnd - nameStart) {
      case 10:
        if (nameIs(buf, nameStart, nameEnd, 'connection')) {
          const options = connectionOptions(buf, valueStart, valueEnd);
          if ((options & CONNECTION_CLOSE) !== 0) this.connectionClose = true;
          if ((options & CONNECTION_KEEP_ALIVE) !== 0) this.connectionKeepAlive = true;
        } else if (nameIs(buf, nameStart, nameEnd, 'keep-alive')) {
          const timeout = keepAliveTimeout(buf, valueStart, valueEnd);
          if (timeout >= 0) this.keepAliveTimeout = timeout;
        }
        return undefined;
      case 14:
        if (!nameIs(buf, nameStart, nameEnd, 'content-length')) return undefined;
        if (this.contentLength >= 0) return 'several Content-Length fields';
        // Like llhttp, HTAB after the digits is refused.
        this.contentLength = hasTab(buf, valueEnd, lineEnd) ? -1 : contentLengthValue(buf, valueStart, valueEnd);
        return this.contentLength < 0 ? 'invalid Content-Length' : undefined;
      case 17:
        if (!nameIs(buf, nameStart, nameEnd, 'transfer-encoding')) return undefined;
        this.transferEncoding += 1;
        // HTAB after the value: llhttp reads `chunked<HTAB>` as another coding; refused as one.
        this.chunked = valueEnd - valueStart === 7 && nameIs(buf, valueStart, valueEnd, 'chunked') && !hasTab(buf, valueEnd, lineEnd);
        return undefined;
      default:
        return undefined;
    }
  }

  /** At the end of the head: why its framing is refused, or undefined. */
  problem(): string | undefined {
    if (this.transferEncoding === 0) return undefined;
    if (this.contentLength >= 0) return 'both Content-Length and Transfer-Encoding';
    if (this.transferEncoding > 1 || !this.chunked) return 'a transfer coding other than chunked';
    // RFC 9112 section 6.1: Transfer-Encoding in an HTTP/1.0 message means faulty framing.
    if (this.http10) return 'Transfer-Encoding in an HTTP/1.0 response';
    return undefined;
  }

  /** The connection may carry another exchange (HTTP/1.1 without `close`, 1.0 with keep-alive). */
  get keepAlive(): boolean {
    return this.http10 ? this.connectionKeepAlive && !this.connectionClose : !this.connectionClose;
  }
}
