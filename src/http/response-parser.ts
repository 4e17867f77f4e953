// A strict, incremental HTTP/1.1 response parser (RFC 9112) for the upstream connection manager.
// It refuses what docs/architecture.md#fact-13 lists — Content-Length with Transfer-Encoding, several
// Content-Length fields, a transfer coding other than chunked, an invalid status line, obs-fold,
// a bare CR or LF, a head over MAX_HEAD_BYTES — and skips 1xx answers. It hands the sink each
// field of the final answer's head, then its status and Content-Length, then each body piece, all
// as slices of the buffer it was given (no copy), valid only during the call. It reads the fields
// that frame the body for itself (response-head.ts); what the caller gets of the others is not
// its business (src/relay/answer/response-headers.ts).
//
// Feed it with `execute(buf, start, end)` as bytes arrive and `finish()` at end of stream. One
// parser per connection; `reset()` before each response.
import { chunkExtensionProblem, fieldNameEnd, fieldNameProblem, fieldValueProblem, HEX, HTAB, statusLineProblem } from './syntax.js';
import { type Framing, FramingFields } from './response-head.js';
import { MAX_HEAD_BYTES } from '../tunables.js';

/** The longest chunk-size line (size, extensions, CRLF) accepted. */
const MAX_CHUNK_LINE_BYTES = 4 * 1024;

/** Chunk sizes are at most 13 hex digits, so every length stays a safe integer. */
const MAX_CHUNK_SIZE_DIGITS = 13;

export interface ResponseSink {
  /**
   * One field of the final (non-1xx) head, in arrival order, the framing fields included: its name
   * `buf[nameStart..nameEnd)` as sent (any case) and its value `buf[valueStart..valueEnd)` trimmed
   * of spaces and tabs, valid only during the call. Trailer fields are not reported. A head refused
   * after some fields were reported gets no `onResponseHead`.
   */
  onResponseField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void;
  /** The final (non-1xx) status line and head arrived. `contentLength` is -1 when absent. */
  onResponseHead(status: number, contentLength: number): void;
  /** A piece of the body: a view of the buffer given to `execute`, valid only during this call. */
  onResponseBody(chunk: Buffer): void;
}

/** `execute` needs more bytes. */
export const PARSE_MORE = 0;
/** The response is complete; `offset` is where it ended in the buffer (later bytes are leftovers). */
export const PARSE_DONE = 1;
/** The response is refused; `error` says why. */
export const PARSE_ERROR = 2;
export type ParseResult = typeof PARSE_MORE | typeof PARSE_DONE | typeof PARSE_ERROR;

const S_STATUS = 0;
const S_HEADER = 1;
const S_BODY_LENGTH = 2;
const S_BODY_CLOSE = 3;
const S_CHUNK_SIZE = 4;
const S_CHUNK_DATA = 5;
const S_CHUNK_CR = 6;
const S_CHUNK_LF = 7;
const S_TRAILER = 8;
const S_DONE = 9;
const S_ERROR = 10;
const S_STOPPED = 11;

const CR = 13;
const LF = 10;
const SP = 32;

export class ResponseParser {
  /** Why the response was refused (after PARSE_ERROR). */
  error = '';
  /** After PARSE_DONE: the offset just past the response in the last buffer. */
  offset = 0;
  /** The final answer's status (0 before its status line). */
  status = 0;
  framing: Framing = 'none';
  /** The connection may carry another exchange after this answer (HTTP/1.1 without `close`, 1.0 with keep-alive). */
  keepAlive = true;
  /** The replica's `Keep-Alive: timeout=N`, in seconds; -1 when absent. */
  keepAliveTimeout = -1;
  /** Bytes of the response seen so far (0: nothing arrived). */
  bytesSeen = 0;

  private state = S_STATUS;
  private expectBody = true;
  private remaining = 0;
  /** Bytes of the current head (or trailer section, or chunk line) so far. */
  private lineBytes = 0;
  /** A line split across buffers, copied here (rare: most heads arrive in one read). */
  private carry: Buffer | undefined = undefined;
  private carryLength = 0;

  // The head being parsed.
  private interim = false;
  private readonly head = new FramingFields();

  constructor(private readonly sink: ResponseSink) {}

  /** Prepares for the answer to a new request; `expectBody` is false for HEAD. */
  reset(expectBody: boolean): void {
    this.expectBody = expectBody;
    this.state = S_STATUS;
    this.error = '';
    this.offset = 0;
    this.status = 0;
    this.framing = 'none';
    this.keepAlive = true;
    this.keepAliveTimeout = -1;
    this.bytesSeen = 0;
    this.remaining = 0;
    this.carryLength = 0;
    this.lineBytes = 0;
  }

  /** No more callbacks, whatever comes (the exchange was aborted). */
  stop(): void {
    this.state = S_STOPPED;
  }

  /** True once the final status line has been handed to the sink. */
  get headDone(): boolean {
    return this.status !== 0;
  }

  /** Parses `buf[start..end)`. */
  execute(buf: Buffer, start: number, end: number): ParseResult {
    this.bytesSeen += end - start;
    let pos = start;
    while (pos < end) {
      switch (this.state) {
        case S_STATUS:
        case S_HEADER:
        case S_TRAILER:
        case S_CHUNK_SIZE: {
          const limit = this.state === S_CHUNK_SIZE ? MAX_CHUNK_LINE_BYTES : MAX_HEAD_BYTES;
          const lf = buf.indexOf(LF, pos);
          if (lf < 0 || lf >= end) {
            if (this.lineBytes + this.carryLength + end - pos > limit) return this.tooLong();
            this.keep(buf, pos, end);
            return PARSE_MORE;
          }
          let line = buf;
          let from = pos;
          let to = lf + 1;
          if (this.carryLength > 0) {
            this.keep(buf, pos, to);
            line = this.carry!;
            from = 0;
            to = this.carryLength;
            this.carryLength = 0;
          }
          const full = to - from;
          if (this.lineBytes + full > limit) return this.tooLong();
          this.lineBytes += full;
          pos = lf + 1;
          // Every line ends with CRLF: a bare LF is refused (and a bare CR inside, below).
          if (full < 2 || line[to - 2] !== CR) return this.fail(full === 1 && this.state === S_STATUS ? 'empty line before the status line' : 'line not ended by CRLF');
          if (!this.line(line, from, to - 2)) return PARSE_ERROR;
          break;
        }
        case S_BODY_LENGTH: {
          const n = Math.min(this.remaining, end - pos);
          this.remaining -= n;
          this.sink.onResponseBody(buf.subarray(pos, pos + n));
          pos += n;
          if (this.remaining === 0 && this.state === S_BODY_LENGTH) this.state = S_DONE;
          break;
        }
        case S_BODY_CLOSE:
          this.sink.onResponseBody(buf.subarray(pos, end));
          pos = end;
          break;
        case S_CHUNK_DATA: {
          const n = Math.min(this.remaining, end - pos);
          this.remaining -= n;
          this.sink.onResponseBody(buf.subarray(pos, pos + n));
          pos += n;
          if (this.remaining === 0 && this.state === S_CHUNK_DATA) this.state = S_CHUNK_CR;
          break;
        }
        case S_CHUNK_CR:
          if (buf[pos++] !== CR) return this.fail('chunk data not followed by CRLF');
          this.state = S_CHUNK_LF;
          break;
        case S_CHUNK_LF:
          if (buf[pos++] !== LF) return this.fail('chunk data not followed by CRLF');
          this.state = S_CHUNK_SIZE;
          this.lineBytes = 0;
          break;
        case S_DONE:
          this.offset = pos;
          return PARSE_DONE;
        case S_ERROR:
          return PARSE_ERROR;
        default:
          // Stopped by the sink: nothing more is parsed or delivered.
          return PARSE_MORE;
      }
    }
    if (this.state === S_DONE) {
      this.offset = pos;
      return PARSE_DONE;
    }
    return this.state === S_ERROR ? PARSE_ERROR : PARSE_MORE;
  }

  /** The stream ended. A body delimited by the close is complete; anything else is cut short. */
  finish(): ParseResult {
    if (this.state === S_BODY_CLOSE || this.state === S_DONE) {
      this.state = S_DONE;
      return PARSE_DONE;
    }
    if (this.state === S_ERROR) return PARSE_ERROR;
    return this.fail(this.bytesSeen === 0 ? 'closed before answering' : 'closed before the answer was complete');
  }

  private tooLong(): ParseResult {
    return this.fail(this.state === S_CHUNK_SIZE ? 'chunk size line too long' : 'response head too large');
  }

  private fail(reason: string): ParseResult {
    this.error = reason;
    this.state = S_ERROR;
    return PARSE_ERROR;
  }

  /** Keeps `buf[start..end)` of an unfinished line. */
  private keep(buf: Buffer, start: number, end: number): void {
    const need = this.carryLength + end - start;
    if (this.carry === undefined || this.carry.length < need) {
      const bigger = Buffer.allocUnsafe(Math.max(need, 1024, (this.carry?.length ?? 0) * 2));
      if (this.carry !== undefined) this.carry.copy(bigger, 0, 0, this.carryLength);
      this.carry = bigger;
    }
    buf.copy(this.carry, this.carryLength, start, end);
    this.carryLength = need;
  }

  /** One complete line `buf[start..end)`, CRLF excluded. False when refused. */
  private line(buf: Buffer, start: number, end: number): boolean {
    switch (this.state) {
      case S_STATUS:
        return this.statusLine(buf, start, end);
      case S_HEADER:
        if (start === end) return this.endOfHead();
        return this.field(buf, start, end, true);
      case S_TRAILER:
        if (start === end) {
          this.state = S_DONE;
          return true;
        }
        return this.field(buf, start, end, false);
      default:
        return this.chunkSize(buf, start, end);
    }
  }

  /** `HTTP/1.1 200 OK` (see `statusLineProblem`). */
  private statusLine(buf: Buffer, start: number, end: number): boolean {
    const problem = statusLineProblem(buf, start, end);
    if (problem !== undefined) return this.refuse(problem);
    const status = (buf[start + 9]! - 48) * 100 + (buf[start + 10]! - 48) * 10 + (buf[start + 11]! - 48);
    this.head.start(buf[start + 7] === 48);
    this.interim = status < 200;
    if (!this.interim) this.status = status;
    this.state = S_HEADER;
    return true;
  }

  /** `name: value`; a field of the final head is read for its framing and reported. */
  private field(buf: Buffer, start: number, end: number, head: boolean): boolean {
    const colon = fieldNameEnd(buf, start, end);
    const problem = colon < 0 ? fieldNameProblem(buf, start) : fieldValueProblem(buf, colon + 1, end);
    if (problem !== undefined) return this.refuse(problem);
    if (!head || this.interim) return true;
    let vs = colon + 1;
    let ve = end;
    while (vs < ve && (buf[vs] === SP || buf[vs] === HTAB)) vs++;
    while (ve > vs && (buf[ve - 1] === SP || buf[ve - 1] === HTAB)) ve--;
    const refused = this.head.read(buf, start, colon, vs, ve, end);
    if (refused !== undefined) return this.refuse(refused);
    this.sink.onResponseField(buf, start, colon, vs, ve);
    return true;
  }

  /** The empty line after the fields: skip a 1xx, check the framing, tell the sink. */
  private endOfHead(): boolean {
    this.lineBytes = 0;
    if (this.interim) {
      this.state = S_STATUS;
      return true;
    }
    const head = this.head;
    const problem = head.problem();
    if (problem !== undefined) return this.refuse(problem);
    const bodyless = !this.expectBody || this.status === 204 || this.status === 304;
    this.keepAlive = head.keepAlive;
    this.keepAliveTimeout = head.keepAliveTimeout;
    if (bodyless) {
      this.framing = 'none';
      this.state = S_DONE;
    } else if (head.chunked) {
      this.framing = 'chunked';
      this.state = S_CHUNK_SIZE;
    } else if (head.contentLength >= 0) {
      this.framing = 'length';
      this.remaining = head.contentLength;
      this.state = head.contentLength === 0 ? S_DONE : S_BODY_LENGTH;
    } else {
      // Neither: the body ends when the replica closes the connection (RFC 9112 section 6.3, rule 8).
      this.framing = 'close';
      this.keepAlive = false;
      this.state = S_BODY_CLOSE;
    }
    this.sink.onResponseHead(this.status, head.contentLength);
    return true;
  }

  private refuse(reason: string): boolean {
    this.fail(reason);
    return false;
  }

  /** `1*HEXDIG [ chunk-ext ]`; a zero size starts the trailer section. */
  private chunkSize(buf: Buffer, start: number, end: number): boolean {
    let size = 0;
    let i = start;
    while (i < end && HEX[buf[i]!]! >= 0) {
      size = size * 16 + HEX[buf[i]!]!;
      i++;
    }
    if (i === start) return this.refuse('invalid chunk size');
    if (i - start > MAX_CHUNK_SIZE_DIGITS) return this.refuse('chunk size too large');
    if (i < end) {
      const problem = chunkExtensionProblem(buf, i, end);
      if (problem !== undefined) return this.refuse(problem);
    }
    this.lineBytes = 0;
    if (size === 0) {
      this.state = S_TRAILER;
    } else {
      this.remaining = size;
      this.state = S_CHUNK_DATA;
    }
    return true;
  }
}

