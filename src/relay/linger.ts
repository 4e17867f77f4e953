// Sluice's error for a caller that is still sending its body: answered at once, with the rest of
// the upload read and dropped before the connection is let go (RFC 9112 section 9.6, the
// "lingering close" of a server that answers before the request is complete).
//
// Closing at once is what uWS's end-and-close does, and it loses answers: the kernel resets a
// connection closed with unread bytes, and a reset can destroy the error in the caller's receive
// buffer before the caller reads it (a client still writing sees EPIPE, not the 413). uWS offers
// no lingering close, and a response cannot be touched once it has ended, so the error is written
// chunked — status, headers and the whole JSON body at once — and the response stays open while
// the rest of the body arrives. The body's last byte ends it cleanly, and the caller, told
// `Connection: close`, closes. Past LINGER_BYTES the socket is no longer read, and a caller still
// sending after LINGER_MS is cut off: it has had the error for that long (a reset would destroy
// an error that reached the caller just before it, so the cut never comes sooner).
import type { HttpResponse } from 'uWebSockets.js';
import type { RelayError } from '../errors.js';
import { statusLine } from '../status-line.js';

/** The most of a refused body read after the answer; past it the socket is paused until the cut. */
export const LINGER_BYTES = 8 * 1024 * 1024;
/** The longest a refused body is read after the answer. */
export const LINGER_MS = 2_000;

/** Writes the status line and headers of one of Sluice's errors (inside a cork). */
export function writeErrorHead(res: HttpResponse, err: RelayError, requestId: string): void {
  res.writeStatus(statusLine(err.status));
  res.writeHeader('content-type', 'application/json');
  res.writeHeader('x-sluice-error', err.code);
  res.writeHeader('x-request-id', requestId);
  if (err.headers !== undefined) for (const name in err.headers) res.writeHeader(name, err.headers[name]!);
}

/**
 * One refused request's response while the rest of its body is read. Feed it the request's body
 * sizes and its abort: from the handlers already attached (`onData`, `aborted`), or by `attach`
 * when none are. It never touches `res` after the end, the cut-off or the caller's abort.
 */
export class Linger {
  private bytes = 0;
  private open = true;
  private paused = false;
  private readonly timer: NodeJS.Timeout;

  /** Answers `err` (never for HEAD: that answer has no body to keep open) and starts reading. */
  constructor(
    private readonly res: HttpResponse,
    err: RelayError,
    requestId: string,
  ) {
    res.cork(() => {
      writeErrorHead(res, err, requestId);
      res.writeHeader('connection', 'close');
      res.write(err.body());
    });
    this.timer = setTimeout(() => this.cut(), LINGER_MS);
    this.timer.unref();
  }

  /**
   * Attaches the Linger's own uWS handlers. Only from inside the request handler, where none are
   * attached yet: replacing an `onData` handler from inside its own call is not safe with uWS.
   */
  attach(): void {
    this.res.onAborted(() => this.aborted());
    this.res.onData((data, isLast) => this.onData(data.byteLength, isLast));
  }

  /** Bytes of the refused body arrived (and are dropped). */
  onData(size: number, isLast: boolean): void {
    if (!this.open) return;
    this.bytes += size;
    if (isLast) {
      this.open = false;
      clearTimeout(this.timer);
      this.res.cork(() => this.res.end());
    } else if (this.bytes > LINGER_BYTES && !this.paused) {
      // Read no more; the caller's writes stall and it can read its error until the cut.
      this.paused = true;
      this.res.pause();
    }
  }

  /** The caller went away (uWS onAborted). */
  aborted(): void {
    this.open = false;
    clearTimeout(this.timer);
  }

  private cut(): void {
    if (!this.open) return;
    this.open = false;
    clearTimeout(this.timer);
    this.res.close();
  }
}
