// The one writer to a caller's uWS response. Everything Sluice sends to the caller goes through
// here: the relayed status and headers (as response-headers.ts decides) and each chunk (corked
// together, facts 4 to 6 in docs/architecture.md), Sluice's own JSON errors, and the unclean
// close that marks a truncated answer. After the caller went away or the response ended, every
// call is a no-op (fact 1).
//
// A request kept alive while it waits (waiting-comments.ts) gets `200 text/event-stream` and comments
// from here before its replica answers. From then on the caller has a status line: the replica's
// event stream continues the response, and anything else (Sluice's error, or a replica's answer
// that cannot follow) ends it with one `event: error`, never a second status line.
import type { HttpResponse } from 'uWebSockets.js';
import type { RelayError } from '../../http/errors.js';
import { sendsHeadAlone } from '../../http/uws-build.js';
import { writeError } from './error-answer.js';
import { errorEvent, WAITING_COMMENT } from './waiting-comments.js';
import { writeReturnedHead } from './response-headers.js';
import { isEventStream } from './sse-events.js';

export interface DownstreamListener {
  /** A caller that was slow can take more bytes (the upstream may resume). */
  onCallerWritable(): void;
  /**
   * The response is about to end (its last byte is being written): `res` is still usable.
   * `relayed`: it ends with the replica's answer complete (not with an error event of Sluice's).
   */
  onResponseEnding(relayed: boolean): void;
}

const EMPTY = Buffer.alloc(0);
/** The largest piece `duringRead` holds back for the end (see there). */
const HOLD_MAX_BYTES = 8 * 1024;
/** The line that carries a chunked event stream's head before its first event (`flushHead`). */
const HEAD_COMMENT = Buffer.from(':\n', 'latin1');

export class Downstream {
  /** The response was ended, closed, or the caller went away: `res` must not be touched. */
  closed = false;
  /** The status line has been written. */
  headersSent = false;
  /** Body bytes handed to uWS: the replica's, a kept-alive request's comments and error event, and HEAD_COMMENT. */
  bytesOut = 0;
  /** `performance.now()` when the answer's status line and first bytes were written (for a kept-alive
   *  request, when the replica's answer or the error event followed the comments); 0 before. */
  firstByteAt = 0;
  /** Sluice sent `200 text/event-stream` while the request waited for its replica. */
  keptAlive = false;
  /** A limited token's `RateLimit-Policy` and `RateLimit` values ('': none). */
  private ratelimitPolicy = '';
  private ratelimitValue = '';

  private status = 200;
  private contentType: string | undefined = undefined;
  /** The replica's Content-Length, or -1 for a chunked answer. */
  private total = -1;
  private bodyless = false;
  /** The answer says `Connection: close` (the caller is still sending a body Sluice will not read). */
  private closeAfter = false;
  /** The keep-alive comment `corkedKeepAlive` writes. */
  private comment = WAITING_COMMENT;
  /** Known-length mode: bytes tryEnd could not take yet, retried from onWritable (fact 5). */
  private pending: Buffer | undefined = undefined;
  private pendingOffset = 0;
  private writableHooked = false;
  /** The result of the last write: false when the caller is slow. */
  private writable = true;
  /** The chunk for `corkedWrite`: a field instead of a closure per chunk. */
  private chunk: Buffer = EMPTY;
  private readonly corkedWrite = (): void => this.writeNow(this.chunk);
  private readonly corkedEnd = (): void => this.endNow();
  /** `held` and the end, in one cork. */
  private readonly corkedLastWrite = (): void => {
    this.writeNow(this.chunk);
    if (!this.closed) this.endNow();
  };
  /** Inside `duringRead`: a small piece may wait in `held` for the next call. */
  private reading = false;
  /**
   * The last small piece of the current read, not written yet (a view of the read buffer, valid
   * until the read is over): it goes out with the answer's end if that comes in the same read,
   * else with the next call or when the read is over.
   */
  private held: Buffer | undefined = undefined;
  /** A kept-alive request: the replica's event stream continues the response. */
  private continued = false;
  /** A kept-alive request: ended with an error event. */
  private errorEventSent = false;

  constructor(
    private readonly res: HttpResponse,
    private readonly requestId: string,
    private readonly listener: DownstreamListener,
  ) {}

  /**
   * Records the replica's status and headers; they are written with the first chunk or the end
   * when these come in the same read, else by `flushHead`.
   * `closeAfter`: the answer says `Connection: close` (CallerBody.closesAfterAnswer).
   */
  begin(status: number, contentType: string | undefined, contentLength: number, bodyless: boolean, closeAfter: boolean): void {
    this.status = status;
    if (this.keptAlive) {
      // The replica's 2xx event stream (waiting-comments.ts: continuesStream) after the comments: its
      // bytes follow in the chunked response already open.
      this.continued = true;
      this.firstByteAt = performance.now();
      return;
    }
    this.contentType = contentType;
    this.total = contentLength;
    this.bodyless = bodyless;
    this.closeAfter = closeAfter;
  }

  /**
   * Relays one chunk. Returns false when the caller is slow: pause the upstream until told.
   * `chunk` may be a view of a shared read buffer: it is written (uWS copies what it buffers) or
   * copied before this returns, never kept.
   */
  write(chunk: Buffer): boolean {
    if (this.closed) return true;
    if (this.held !== undefined) {
      this.writeHeld();
      // The held piece ended a known-length answer: nothing more is written.
      if (this.closed) return true;
    }
    if (this.reading && chunk.length <= HOLD_MAX_BYTES) {
      this.held = chunk;
      return this.writable;
    }
    this.chunk = chunk;
    this.res.cork(this.corkedWrite);
    this.chunk = EMPTY;
    return this.writable;
  }

  /**
   * Runs `parse`, the parse of one read of the replica's answer; returns false when the caller is
   * slow (pause the upstream until told). A stream's last event and the end of the answer usually
   * come in one read: written in one cork, they go out in one send instead of two, which on
   * loopback is also one wake-up of the caller instead of two (docs/architecture.md#fact-4).
   *
   * Why one piece is held rather than the whole read written in one cork: uWS's cork buffer is
   * 16 KiB, and a write that overflows it sends the buffer first; when that send is short, the
   * older build (uws-pack) drops the overflowing bytes instead of queueing them. A cork with one
   * data write of at most HOLD_MAX_BYTES, the head and the end's 5 bytes never overflows.
   */
  duringRead(parse: () => void): boolean {
    this.reading = true;
    try {
      parse();
    } finally {
      this.reading = false;
      if (this.held !== undefined) this.writeHeld();
    }
    return this.writable || this.closed;
  }

  /** Writes the held piece (`duringRead`) in a cork of its own. */
  private writeHeld(): void {
    this.chunk = this.held!;
    this.held = undefined;
    if (!this.closed) this.res.cork(this.corkedWrite);
    this.chunk = EMPTY;
  }

  /**
   * The replica's head came without body bytes in the same read and the answer goes on: its
   * status line and headers go out now (docs/api.md#what-the-caller-receives). A known length:
   * `tryEnd` with no bytes writes the head with its Content-Length and leaves the response open,
   * on a build that can (`sendsHeadAlone`: v20.57.0 ends the response there, so its head waits for
   * the first body bytes). A chunked answer: uWS ends a head only with a first chunk (an empty
   * `write` sends nothing), so an event stream's head goes with HEAD_COMMENT, a comment line event
   * parsers skip; any other chunked answer's head waits for its first bytes.
   */
  flushHead(): void {
    // A held piece (the read's body bytes, not written yet) carries the head.
    if (this.closed || this.headersSent || this.held !== undefined || this.keptAlive || this.bodyless) return;
    if (this.total < 0 ? !isEventStream(this.contentType) : this.total === 0 || !sendsHeadAlone()) return;
    this.write(this.total < 0 ? HEAD_COMMENT : EMPTY);
  }

  /** The replica's answer is complete. */
  end(): void {
    if (this.closed) return;
    // Once per response at most, and not at all for a known-length answer ended by its last chunk.
    if (this.held === undefined) {
      this.res.cork(this.corkedEnd);
      return;
    }
    this.chunk = this.held;
    this.held = undefined;
    this.res.cork(this.corkedLastWrite);
    this.chunk = EMPTY;
  }

  /**
   * The request still waits for its replica: the first call sends `200 text/event-stream` (with
   * `Connection: close` if `closeAfter`), each call a comment (`comment`: waiting-comments.ts). A
   * comment the caller has not read yet is not followed by another.
   */
  keepAlive(closeAfter: boolean, comment: string): void {
    if (this.closed || (this.headersSent && !this.keptAlive) || this.continued || !this.writable) return;
    this.closeAfter = closeAfter;
    this.comment = comment;
    this.res.cork(this.corkedKeepAlive);
  }

  private readonly corkedKeepAlive = (): void => {
    const res = this.res;
    if (!this.keptAlive) {
      this.keptAlive = true;
      this.headersSent = true;
      this.total = -1;
      res.writeStatus('200 OK');
      res.writeHeader('content-type', 'text/event-stream');
      res.writeHeader('x-request-id', this.requestId);
      this.writeRatelimit();
      if (this.closeAfter) res.writeHeader('connection', 'close');
    }
    this.bytesOut += this.comment.length; // ASCII: one byte a character
    this.writable = res.write(this.comment);
    if (!this.writable) this.hookWritable();
  };

  /**
   * Bytes of the replica's answer may have reached the caller: a failure now can only cut the
   * answer short (`truncate`).
   */
  get relaying(): boolean {
    return this.keptAlive ? this.continued : this.headersSent || this.held !== undefined;
  }

  /**
   * The caller was told the answer's status (`statusCode`): by its status line, or after
   * keep-alive comments by the replica's stream or an error event.
   */
  get answered(): boolean {
    return this.keptAlive ? this.continued || this.errorEventSent : this.headersSent;
  }

  /**
   * Ends a kept-alive response with one `error` event (`json`: an error body) and a clean end;
   * `status` is the answer's real status, for the access line and the metrics.
   */
  endWithErrorEvent(status: number, json: string): void {
    if (this.closed) return;
    if (this.held !== undefined) this.writeHeld();
    this.closed = true;
    this.errorEventSent = true;
    this.status = status;
    this.firstByteAt = performance.now();
    this.listener.onResponseEnding(false);
    const text = errorEvent(json);
    this.bytesOut += Buffer.byteLength(text);
    this.res.cork(() => this.res.end(text));
  }

  /**
   * The answer cannot be completed: close the connection without a clean end, so the caller sees
   * a short Content-Length body or a chunked body with no final chunk (docs/api.md#what-the-caller-receives).
   */
  truncate(): void {
    if (this.closed) return;
    if (this.held !== undefined) this.writeHeld();
    this.closed = true;
    this.res.close();
  }

  /**
   * Sends one of Sluice's own errors (no body for HEAD; an error event after keep-alive comments),
   * or truncates if the relayed status was sent. The connection is not closed here: with
   * `closeLater` (the caller is still sending a body Sluice stopped reading: CallerBody.endUpload)
   * the error says `Connection: close` and uWS's idle timer closes the connection; closing at once
   * with the caller's bytes unread would make the kernel reset the connection, and a reset can
   * destroy the error in the caller's receive buffer before the caller reads it (RFC 9112 section
   * 9.6). After keep-alive comments no header can be added: the socket stays paused as well, and
   * the idle timer closes it.
   */
  error(err: RelayError, head: boolean, closeLater: boolean): void {
    if (this.closed) return;
    if (this.held !== undefined) this.writeHeld();
    if (this.keptAlive && !this.continued) {
      this.endWithErrorEvent(err.status, err.body());
      return;
    }
    if (this.headersSent) {
      this.truncate();
      return;
    }
    this.closed = true;
    this.headersSent = true;
    this.status = err.status;
    writeError(this.res, err, this.requestId, closeLater ? 'closeLater' : 'keep', head);
  }

  /** The caller went away (uWS onAborted). */
  aborted(): void {
    this.closed = true;
    this.held = undefined;
  }

  /** The status of the answer the caller got (relayed or Sluice's own). */
  get statusCode(): number {
    return this.status;
  }

  /** The answer of a limited token's request carries these (rate-limit-headers.ts). */
  ratelimit(policy: string, value: string): void {
    this.ratelimitPolicy = policy;
    this.ratelimitValue = value;
  }

  private writeRatelimit(): void {
    if (this.ratelimitPolicy === '') return;
    this.res.writeHeader('ratelimit-policy', this.ratelimitPolicy);
    this.res.writeHeader('ratelimit', this.ratelimitValue);
  }

  private writeHead(): void {
    writeReturnedHead(this.res, this.status, this.contentType, this.total, this.bodyless, this.requestId, this.closeAfter);
    this.writeRatelimit();
    this.headersSent = true;
    this.firstByteAt = performance.now();
  }

  private writeNow(chunk: Buffer): void {
    if (!this.headersSent) this.writeHead();
    this.bytesOut += chunk.length;
    if (this.total < 0) {
      // uWS frames the chunk itself (fact 6); false means buffered, not dropped (fact 5).
      this.writable = this.res.write(chunk);
      if (!this.writable) this.hookWritable();
      return;
    }
    if (this.pending !== undefined) {
      // A chunk arrived while an earlier one waits for the caller (rare: the upstream was paused).
      this.pending = Buffer.concat([this.pending, chunk]);
      this.writable = false;
      return;
    }
    if (this.bytesOut >= this.total) this.listener.onResponseEnding(true);
    this.tryEnd(chunk);
  }

  private tryEnd(chunk: Buffer): void {
    if (this.bytesOut === this.total && chunk.length === this.total) {
      // The whole answer in one chunk (the common case): end() writes it with its length.
      this.res.end(chunk);
      this.closed = true;
      return;
    }
    const offset = this.res.getWriteOffset();
    const [ok, done] = this.res.tryEnd(chunk, this.total);
    if (done) {
      this.closed = true;
      this.writable = true;
    } else if (!ok) {
      // The chunk may be a view of the upstream read buffer, valid only now: keep a copy.
      this.pending = Buffer.from(chunk);
      this.pendingOffset = offset;
      this.writable = false;
      this.hookWritable();
    } else {
      this.writable = true;
    }
  }

  private retry(offset: number): boolean {
    if (this.closed) return true;
    const pending = this.pending;
    if (pending !== undefined) {
      if (this.bytesOut >= this.total) this.listener.onResponseEnding(true);
      const [ok, done] = this.res.tryEnd(pending.subarray(offset - this.pendingOffset), this.total);
      if (done) this.closed = true;
      if (!ok && !done) return false;
      this.pending = undefined;
    }
    this.writable = true;
    this.listener.onCallerWritable();
    return true;
  }

  private hookWritable(): void {
    if (this.writableHooked) return;
    this.writableHooked = true;
    // Only a caller that fell behind needs this handler (uWS keeps the last one; it is set once).
    this.res.onWritable((offset) => this.retry(offset));
  }

  private endNow(): void {
    if (!this.headersSent) this.writeHead();
    const res = this.res;
    if (this.bodyless || this.total < 0 || (this.pending === undefined && this.bytesOut <= this.total)) {
      this.listener.onResponseEnding(true);
    }
    if (this.bodyless) {
      // HEAD, 204 or 304: no body (a HEAD answer's Content-Length went with the head: writeReturnedHead).
      res.endWithoutBody();
      this.closed = true;
    } else if (this.total < 0) {
      res.end();
      this.closed = true;
    } else if (this.pending === undefined) {
      // Known length: tryEnd ended the response with its last byte; a shorter body is truncated.
      if (this.bytesOut === 0 && this.total === 0) {
        res.end();
        this.closed = true;
      } else if (this.bytesOut < this.total) {
        this.truncate();
      }
    }
    // Otherwise the last bytes wait in `pending`; `retry` ends the response when they are written.
  }
}
