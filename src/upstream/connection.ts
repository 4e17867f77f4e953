// One keep-alive connection to a replica on a raw `net.Socket`: it writes a request (head and a
// whole body in one write, or a streamed body piece by piece with backpressure; the bytes and
// their framing in request-framing.ts), parses the answer
// with the strict ResponseParser and hands each head field, the status and body pieces straight
// to the request's handler (the relay, which decides what the caller gets), then decides whether
// it may carry another exchange (docs/architecture.md#fact-13): never after `Connection: close`,
// an HTTP/1.0 answer without keep-alive, bytes left over after a complete answer, a request body
// the replica did not wait for, a FIN, or a failed exchange. A write of the request that fails
// (the replica closed without reading all of it) leaves the socket open for the answer the replica
// may have sent first (write-failure.ts, fact 22). Deadlines are ticks of the one process-wide
// interval (ticker.ts): arming one is an integer store, and the connection is visited only at the
// tick its earliest deadline names.
//
// Reads go through one shared buffer per thread (`onread`, fact 12): a body piece handed to the
// handler is a view of it, valid only during the call.
import { connect, type Socket } from 'node:net';
import type { RelayError } from '../http/errors.js';
import { bodyTimedOut, connectFailed, connectionLost, connectTimedOut, headersTimedOut, malformedResponse, poolClosed } from './errors.js';
import { PARSE_DONE, PARSE_ERROR, PARSE_MORE, ResponseParser, type ResponseSink } from '../http/response-parser.js';
import { cancel, type Deadline, schedule, tickNow, ticksFor } from '../time/ticker.js';
import type { UpstreamExchange, UpstreamHandler } from './handler.js';
import { writeBodyPiece, writeHead, writeHeadJoined, writeHeadPieces } from './request-framing.js';
import { reportWriteFailures, type WriteFailureSink } from './write-failure.js';
import { JOIN_LIMIT, UPSTREAM_KEEP_ALIVE_MARGIN_MS, UPSTREAM_KEEP_ALIVE_MS, TICK_MS } from '../tunables.js';

/** The read buffer shared by every upstream socket of this thread. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

const CONNECTING = 0;
const BUSY = 1;
const RELEASING = 2;
const IDLE = 3;
const CLOSED = 4;
/**
 * - CONNECTING: TCP connect in progress, bound to the handler that asked for it;
 * - BUSY: one exchange in progress (`handler` set);
 * - RELEASING: the exchange completed; the pool makes it idle (or hands it on) after the current
 *   I/O callback, so a FIN that arrived with the answer is seen first;
 * - IDLE: in the pool's idle list, reading only to notice a FIN or stray bytes;
 * - CLOSED: gone.
 */
type State = typeof CONNECTING | typeof BUSY | typeof RELEASING | typeof IDLE | typeof CLOSED;

/** The pool's side of a connection. */
export interface ConnectionOwner {
  readonly connectMs: number;
  readonly headersMs: number;
  readonly bodyIdleMs: number;
  /** Ticks after which a request still waiting for its status line is overdue (0: not counted). */
  readonly overdueTicks: number;
  /** `delta` more (or fewer) of its requests are overdue for their status line. */
  overdue(delta: number): void;
  /** A complete exchange left the connection reusable. */
  released(connection: UpstreamConnection): void;
  /** The connection is closed (called once). */
  closed(connection: UpstreamConnection): void;
}

export class UpstreamConnection implements UpstreamExchange, ResponseSink, Deadline, WriteFailureSink {
  handler: UpstreamHandler | undefined;
  private state: State = CONNECTING;
  private readonly socket: Socket;
  private readonly parser = new ResponseParser(this);
  /** The request body is sent with chunked framing. */
  private chunked = false;
  /** The request's last byte has been written. */
  private requestDone = false;
  /** The handler asked to pause the replica's stream. */
  private paused = false;
  /** The replica sent FIN. */
  private ended = false;
  /** A write of the request failed: nothing more is written, the answer may still come. */
  private writeFailed = false;
  /** The current deadline's length in ticks (0: none), and the tick at which it passes. */
  private limit = 0;
  private deadline = 0;
  private keepAliveTicks = 0;
  /** The tick at which the written request, still without its status line, is overdue (0: not waiting, or not counted). */
  private overdueAt = 0;
  /** The request is counted as overdue by the owner. */
  private overdueCounted = false;
  /** The head was handed to the handler during the current read (`onUpstreamHeadRead`). */
  private headRead = false;
  /** The current read's length in READ_BUFFER, and whether the socket reads on after it (`readNow`). */
  private readLength = 0;
  private readResult = true;
  /** The ticker's (Deadline). */
  dueTick = -1;
  duePrev: Deadline | undefined = undefined;
  dueNext: Deadline | undefined = undefined;

  constructor(
    private readonly owner: ConnectionOwner,
    host: string,
    port: number,
    handler: UpstreamHandler,
  ) {
    this.handler = handler;
    this.socket = connect({ host, port, noDelay: true, onread: { buffer: READ_BUFFER, callback: this.onRead } });
    reportWriteFailures(this.socket, this);
    this.socket.on('connect', this.onConnect);
    this.socket.on('error', this.onError);
    this.socket.on('end', this.onEnd);
    this.socket.on('close', this.onClose);
    this.socket.on('drain', this.onDrain);
    this.arm(ticksFor(owner.connectMs));
  }

  get connecting(): boolean {
    return this.state === CONNECTING;
  }

  get releasing(): boolean {
    return this.state === RELEASING;
  }

  // ── the request ────────────────────────────────────────────────────────────────────────────

  /**
   * Writes the request head and, if given, body bytes with it (one write). `last`: the body is
   * complete with these bytes (always true for a request without body). `expectBody` is false for
   * HEAD. Returns false when the socket's buffer is full: wait for `onUpstreamWritable`.
   */
  send(head: string, expectBody: boolean, chunked: boolean, body: Buffer | undefined, last: boolean): boolean {
    if (this.state !== BUSY) return true;
    this.parser.reset(expectBody);
    this.chunked = chunked;
    const ok = writeHead(this.socket, head, chunked, body, last);
    if (last) this.requestWritten();
    else if (!ok) this.writeBlocked();
    return ok;
  }

  /**
   * `send` for a whole body (`last`) that is valid only during the call (a view of uWS's buffer,
   * fact 3). Returns the body as a Buffer of its own, kept for a retry: for a body up to
   * JOIN_LIMIT a view of the one buffer written with the head, so the body is copied once, not
   * copied out of uWS and then again next to the head.
   */
  sendWhole(head: string, expectBody: boolean, chunked: boolean, body: Uint8Array): Buffer {
    const size = body.length;
    if (this.state !== BUSY || size === 0 || size > JOIN_LIMIT) {
      const copy = Buffer.copyBytesFrom(body);
      this.send(head, expectBody, chunked, copy, true);
      return copy;
    }
    this.parser.reset(expectBody);
    this.chunked = chunked;
    const kept = writeHeadJoined(this.socket, head, chunked, body);
    this.requestWritten();
    return kept;
  }

  /** `send` for a whole body of `size` bytes in pieces (a held chunked upload, framed by the head's
   *  Content-Length): joined with the head up to JOIN_LIMIT, else one corked write. */
  sendPieces(head: string, expectBody: boolean, pieces: readonly Buffer[], size: number): boolean {
    if (this.state !== BUSY) return true;
    if (pieces.length <= 1) return this.send(head, expectBody, false, pieces[0], true);
    this.parser.reset(expectBody);
    this.chunked = false;
    const ok = writeHeadPieces(this.socket, head, pieces, size);
    this.requestWritten();
    return ok;
  }

  /** Writes one more piece of a streamed body (`chunk` may be undefined with `last`). */
  writeBody(chunk: Buffer | undefined, last: boolean): boolean {
    if (this.state !== BUSY || this.writeFailed) return true;
    const ok = writeBodyPiece(this.socket, this.chunked, chunk, last);
    if (last) this.requestWritten();
    else if (!ok) this.writeBlocked();
    return ok;
  }

  /** Lets the replica's stream flow again after `onUpstreamData` returned false. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    // The body idle deadline waited while the caller was slow: it runs again from now.
    if (this.limit !== 0) this.deadline = tickNow() + this.limit;
    if (this.state === BUSY) this.socket.resume();
  }

  /** Ends the exchange now (the caller left, or the relay gave up): no more handler calls. */
  abort(): void {
    this.handler = undefined;
    this.destroy();
  }

  /** The pool is going away: an exchange in progress fails (retryable only while still connecting). */
  shutdown(): void {
    if (this.handler === undefined) this.destroy();
    else this.fail(this.state === CONNECTING ? poolClosed() : connectionLost('the connection pool was closed'));
  }

  /** Closes the connection; the handler, if any, is not told (see `abort` and `shutdown`). */
  destroy(): void {
    if (this.state === CLOSED) return;
    this.state = CLOSED;
    this.headCame();
    this.parser.stop();
    this.socket.destroy();
    cancel(this);
    this.owner.closed(this);
  }

  // ── the pool's side ────────────────────────────────────────────────────────────────────────

  /** Hands the connection (connected, not busy) to a request. */
  assign(handler: UpstreamHandler): void {
    this.state = BUSY;
    this.handler = handler;
    this.requestDone = false;
    this.paused = false;
    this.arm(0);
    handler.onUpstreamConnection(this);
  }

  /** Puts a released connection in the idle list's state: it closes itself before the keep-alive timeout. */
  makeIdle(): void {
    this.state = IDLE;
    this.arm(this.keepAliveTicks);
  }

  // ── deadlines ──────────────────────────────────────────────────────────────────────────────

  private arm(limit: number): void {
    this.limit = limit;
    this.deadline = limit === 0 ? 0 : tickNow() + limit;
    this.scheduleNext();
  }

  /** Asks the ticker for the earliest of the deadline and the overdue tick (a later one it already has stays: it looks again then). */
  private scheduleNext(): void {
    const deadline = this.deadline;
    const overdueAt = this.overdueAt;
    const next = deadline === 0 ? overdueAt : overdueAt === 0 || deadline < overdueAt ? deadline : overdueAt;
    if (next !== 0) schedule(this, next);
  }

  onDeadline(): void {
    if (this.state === CLOSED) return;
    const now = tickNow();
    if (this.overdueAt !== 0 && now >= this.overdueAt) {
      this.overdueAt = 0;
      this.overdueCounted = true;
      this.owner.overdue(1);
    }
    if (this.deadline !== 0 && now >= this.deadline) {
      if (this.paused) {
        // The caller is slow, not the replica: the body idle deadline waits (`resume` restarts it).
        this.deadline = now + this.limit;
      } else {
        if (this.state === CONNECTING) this.fail(connectTimedOut(this.owner.connectMs));
        else if (this.state === BUSY) this.fail(this.parser.headDone ? bodyTimedOut(this.owner.bodyIdleMs) : headersTimedOut(this.owner.headersMs));
        else this.destroy();
        return;
      }
    }
    this.scheduleNext();
  }

  /**
   * The socket did not take a piece of the request body at once. Until it drains, the replica is
   * not reading the request: the response head deadline runs (a replica that froze with an upload
   * half read must not hold the request until the caller's own idle timeout).
   */
  private writeBlocked(): void {
    if (!this.parser.headDone) this.arm(ticksFor(this.owner.headersMs));
  }

  private requestWritten(): void {
    this.requestDone = true;
    // The response head deadline runs from the request's last byte (a slow upload is not the replica's fault).
    if (!this.parser.headDone) {
      if (this.owner.overdueTicks > 0) this.overdueAt = tickNow() + this.owner.overdueTicks;
      this.arm(ticksFor(this.owner.headersMs));
    }
  }

  /**
   * A write of the request failed (write-failure.ts): the replica closed its connection, or reset
   * it, without reading the whole request. What it answered before that is still to be read, so
   * the exchange goes on without the rest of the body; the status line is waited for as after the
   * request's last byte, and the connection is not reused.
   */
  onWriteFailed(): void {
    if (this.state !== BUSY || this.writeFailed) return;
    this.writeFailed = true;
    if (!this.parser.headDone) this.arm(ticksFor(this.owner.headersMs));
  }

  /** The wait for a status line is over (it came, or the exchange ended): no longer overdue. */
  private headCame(): void {
    this.overdueAt = 0;
    if (!this.overdueCounted) return;
    this.overdueCounted = false;
    this.owner.overdue(-1);
  }

  // ── the response (ResponseSink) ────────────────────────────────────────────────────────────

  onResponseField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void {
    this.handler?.onUpstreamField(buf, nameStart, nameEnd, valueStart, valueEnd);
  }

  onResponseHead(status: number, contentLength: number): void {
    this.headCame();
    this.arm(ticksFor(this.owner.bodyIdleMs));
    this.headRead = true;
    this.handler?.onUpstreamHead(status, contentLength);
  }

  onResponseBody(chunk: Buffer): void {
    const handler = this.handler;
    if (handler !== undefined && chunk.length > 0 && !handler.onUpstreamData(chunk)) this.paused = true;
  }

  /** The answer is complete: detach the handler, keep or close the connection, then tell the handler. */
  private complete(leftover: boolean): void {
    const handler = this.handler!;
    this.handler = undefined;
    this.paused = false;
    const hint = this.parser.keepAliveTimeout;
    const keepMs = hint < 0 ? UPSTREAM_KEEP_ALIVE_MS : Math.min(UPSTREAM_KEEP_ALIVE_MS, hint * 1000 - UPSTREAM_KEEP_ALIVE_MARGIN_MS);
    // Reusable only if the replica has the whole request: written completely and flushed to the
    // kernel (an answer that came first may mean the replica never reads the rest).
    const requestSent = this.requestDone && !this.writeFailed && this.socket.writableLength === 0;
    if (!leftover && !this.ended && requestSent && this.parser.keepAlive && keepMs > TICK_MS) {
      this.keepAliveTicks = ticksFor(keepMs);
      this.state = RELEASING;
      this.arm(0);
      this.owner.released(this);
    } else {
      this.destroy();
    }
    handler.onUpstreamEnd();
  }

  private fail(error: RelayError): void {
    const handler = this.handler;
    this.handler = undefined;
    this.destroy();
    handler?.onUpstreamError(error);
  }

  // ── socket events (bound once per connection) ──────────────────────────────────────────────

  private readonly onConnect = (): void => {
    if (this.state !== CONNECTING) return;
    this.state = BUSY;
    this.arm(0);
    this.handler!.onUpstreamConnection(this);
  };

  private readonly onRead = (n: number): boolean => {
    const handler = this.handler;
    if (this.state !== BUSY || handler === undefined) {
      // Bytes nobody asked for (on an idle or released connection): never reuse it.
      this.destroy();
      return false;
    }
    // The handler runs the read's parse (`readNow`) so that what it writes to its caller goes out together.
    this.readLength = n;
    if (!handler.onUpstreamRead(this.readNow) && this.state === BUSY && this.handler === handler) {
      this.paused = true;
      return false;
    }
    return this.readResult;
  };

  /** The current read, parsed: its pieces reach the handler (`onRead`, through `onUpstreamRead`). */
  private readonly readNow = (): void => {
    this.readResult = this.parseRead(this.readLength);
  };

  private parseRead(n: number): boolean {
    const result = this.parser.execute(READ_BUFFER, 0, n);
    const headRead = this.headRead;
    this.headRead = false;
    if (result === PARSE_MORE) {
      if (this.state !== BUSY) return false;
      // The body idle deadline runs from the last read (a store: the ticker looks when it comes).
      if (this.parser.headDone && this.limit !== 0) this.deadline = tickNow() + this.limit;
      // Head and body pieces of one read reach the caller in one write; a head alone goes now.
      if (headRead) this.handler?.onUpstreamHeadRead();
      return !this.paused;
    }
    if (result === PARSE_ERROR) {
      this.fail(malformedResponse(this.parser.error));
      return false;
    }
    this.complete(this.parser.offset < n);
    return true;
  }

  private readonly onEnd = (): void => {
    this.ended = true;
    if (this.state === BUSY && this.handler !== undefined) {
      if (this.parser.finish() === PARSE_DONE) this.complete(false);
      else this.fail(connectionLost(`replica ${this.parser.error}`));
      return;
    }
    this.destroy();
  };

  private readonly onError = (err: Error): void => {
    if (this.state === CONNECTING) this.fail(connectFailed(err));
    else if (this.state === BUSY) this.fail(connectionLost(err));
    else this.destroy();
  };

  private readonly onClose = (): void => {
    if (this.state === BUSY) this.fail(connectionLost('connection closed'));
    else this.destroy();
  };

  private readonly onDrain = (): void => {
    if (this.state !== BUSY) return;
    // The replica read the backlog: a slow upload is not its fault, the head deadline waits for the last byte.
    if (!this.requestDone && !this.writeFailed && !this.parser.headDone) this.arm(0);
    this.handler?.onUpstreamWritable();
  };
}
