// The caller's request body, from uWS onData to the replica's connection, with backpressure both
// ways. A body that arrives whole in the first onData call (most inference requests, fact 11)
// becomes one Buffer, written with the request head in one write. Anything else streams: chunks
// are copied (fact 3) and, until a connection is ready, queued; once it is, they are written to
// it as they arrive. The caller's socket is paused while the queue is full, while the connection's
// buffer is full, or while no replica has been assigned yet, so a body is never held whole.
//
// The one exception: a chunked body, under the service's `uploads.bufferBytes`, is held until it
// ends or passes that bound (docs/configuration.md#chunked-uploads). Its pieces are copied out of
// uWS (fact 3) straight into the queue, which is the hold: nothing is dispatched until the hold
// ends. Ended within the bound, the pieces go to the replica with Content-Length; past it, the
// body streams chunked from the queue on, as any other. Every byte in the queue counts in the
// service's account of waiting bodies (held-bodies.ts).
//
// A request whose body's fields are read (a router's, a token's with tokensPerMinute: `read`) is
// held the same way whatever its framing, up to at least ROUTER_MODEL_BYTES, and each piece is
// walked as it arrives (body-fields.ts), before it is queued or written: a piece that contradicts
// what the request decided from its first part is never written to the replica.
import type { HttpResponse } from 'uWebSockets.js';
import type { UpstreamExchange } from '../../upstream/handler.js';
import type { HeldBodies } from './held-bodies.js';
import { HOLD_HIGH_WATER } from '../../tunables.js';

/** How many bytes may wait for a connection before the caller's socket is paused. */
const QUEUE_HIGH_WATER = 256 * 1024;

/**
 * After an answer that came before the whole body, the most of the body's rest that is still read
 * and dropped so the connection can serve the next request. Only a declared rest this small is
 * read: uWS renews its 10 s idle timer only after 160 KB have arrived, so reading at most this
 * much ends within about two of its timeouts however slowly the caller sends.
 */
const DRAIN_MAX_BYTES = 128 * 1024;

export interface CallerBodyListener {
  /** The first bytes (or the whole body) are here: the request can be dispatched. */
  onBodyStart(): void;
  /** The body crossed the service's `maxRequestBytes`. */
  onBodyTooLarge(): void;
  /** A piece of the body contradicts what the request decided from its first part (`reason`: the 400's message); it was not written. */
  onBodyRefused(reason: string): void;
}

/** What reads a body's fields as it arrives (body-fields.ts). */
export interface BodyReader {
  /** Walks the body's next piece: false when it contradicts what was decided (then `refused` says why). */
  feed(piece: Uint8Array): boolean;
  readonly refused: string | undefined;
}

export class CallerBody {
  /** Bytes received from the caller so far. */
  received = 0;
  /** The last byte has arrived. */
  complete = false;
  /** The whole body, when it arrived in a single onData call before anything was streamed. */
  whole: Buffer | undefined = undefined;
  /** That body as uWS hands it over, during the onData call only (fact 3): written from here if
   *  a connection is ready at once, else copied into `whole` when the call ends. */
  private wholeView: Uint8Array | undefined = undefined;

  private queue: Buffer[] = [];
  private queuedBytes = 0;
  /** The connection the rest of a streamed body goes to, once it is ready. */
  private connection: UpstreamExchange | undefined = undefined;
  /** Bytes of a streamed body have been written to a connection: it cannot be sent again. */
  private sent = false;
  /** The connection's buffer is full: wait for `onWritable`. */
  private blocked = false;
  private paused = false;
  private stopped = false;
  private highWater = QUEUE_HIGH_WATER;
  private started = false;
  /** The request waits in the service's queue (`hold` until `release`). */
  private inQueue = false;
  /** A chunked body is being held: nothing is dispatched until it ends or passes the bound. */
  private holding: boolean;
  /** The held body ended within the bound: `queue` is all of it, sent with Content-Length and
   *  kept (for a retry) until the replica answers. */
  private heldWhole = false;
  /**
   * What the hold kept, within its bound, before it ended: the whole body when it went with
   * Content-Length, else the bytes before the piece that passed the bound (or the service's
   * account) — never more than the hold's bound (`uploads.bufferBytes`, or a read body's first
   * part); -1: not held.
   */
  heldBytes = -1;
  /** The bytes a hold keeps at most (the service's `uploads.bufferBytes`, or more for a body that is read). */
  private holdBound: number;
  /** Reads the body's fields as it arrives (`read`). */
  private reader: BodyReader | undefined = undefined;

  constructor(
    private readonly res: HttpResponse,
    private limit: number,
    /** The caller's Content-Length, or -1 for a chunked body. */
    private readonly declared: number,
    private readonly listener: CallerBodyListener,
    private readonly account: HeldBodies,
  ) {
    this.holding = (declared < 0 || account.holdsEvery) && account.bufferBytes > 0;
    this.holdBound = account.bufferBytes;
  }

  /**
   * The request reads its body's fields (body-fields.ts): every piece goes to `reader` as it
   * arrives, and the body is held, whatever its framing, until it is complete or `bytes` are held
   * (as a chunked upload is: `onBodyStart` then says the first part is in; an empty first piece
   * says nothing, fact 21). Before the first onData.
   */
  read(reader: BodyReader, bytes: number): void {
    this.reader = reader;
    this.holding = true;
    this.holdBound = Math.max(this.holdBound, bytes);
  }

  /**
   * A traced request's body is walked as it arrives for the fields its spans name (tracing/), and
   * not held: `reader` never refuses (it decides nothing). Before the first onData.
   */
  watch(reader: BodyReader): void {
    this.reader = reader;
  }

  /**
   * A routed request's service is known (model-router.ts): its `maxRequestBytes` applies from now
   * on. False when the body is already, or declares to be, larger.
   */
  limitTo(limit: number): boolean {
    this.limit = limit;
    return this.received <= limit && this.declared <= limit;
  }

  /** The uWS onData callback's work. `data` is only valid during the call (fact 3). */
  onData(data: ArrayBuffer, isLast: boolean): void {
    // After the request is over (its answer ended, or an error answered it), uWS hands over what
    // it still reads of an unfinished body (see `endUpload`): dropped.
    if (this.stopped) return;
    const size = data.byteLength;
    this.received += size;
    if (this.received > this.limit) {
      // The listener answers and ends the upload (`endUpload`: it needs to know whether the socket
      // is paused, which `stop` first would forget); stopped either way.
      this.listener.onBodyTooLarge();
      this.stop();
      return;
    }
    if (this.reader !== undefined && size > 0 && !this.reader.feed(new Uint8Array(data))) {
      // Answered by the listener (it ends the upload first, as for a body too large).
      this.listener.onBodyRefused(this.reader.refused!);
      this.stop();
      return;
    }
    if (isLast) this.complete = true;
    if (!this.started && isLast && this.received === size) {
      this.started = true;
      if (this.holding) {
        // A chunked body that arrived whole: within the bound it goes with Content-Length.
        this.holding = false;
        this.heldWhole = size <= this.holdBound;
        this.heldBytes = this.heldWhole ? size : 0;
      }
      if (size === 0) {
        this.whole = Buffer.alloc(0);
        this.listener.onBodyStart();
        return;
      }
      const view = new Uint8Array(data);
      this.wholeView = view;
      this.listener.onBodyStart();
      this.wholeView = undefined;
      // Not sent during the call (no connection ready yet): keep a copy, as before.
      if (this.whole === undefined) this.whole = Buffer.copyBytesFrom(view);
      return;
    }
    const chunk = size === 0 ? undefined : Buffer.copyBytesFrom(new Uint8Array(data));
    if (this.connection !== undefined) {
      if (!this.connection.writeBody(chunk, isLast)) this.block();
    } else if (chunk !== undefined) {
      this.queue.push(chunk);
      this.queuedBytes += size;
      this.account.bytes += size;
      if (this.holding && !this.holdEnds(isLast, size)) {
        if (this.full()) this.pause();
        return;
      }
      if (!isLast && this.full()) this.pause();
    } else if (this.holding && !this.holdEnds(isLast, 0)) {
      return;
    }
    if (!this.started) {
      this.started = true;
      this.listener.onBodyStart();
    }
  }

  /**
   * Writes the request to a ready connection: `head` with the whole body, or with what has
   * arrived of a streamed one (the rest follows as it comes). `chunked`: Sluice sends it chunked
   * (a chunked body not held whole, docs/api.md#what-the-replica-receives); `expectBody` is false for HEAD.
   */
  sendTo(connection: UpstreamExchange, head: string, chunked: boolean, expectBody: boolean): void {
    if (this.heldWhole && this.whole === undefined && this.wholeView === undefined) {
      // The hold: written from its pieces, which stay for a retry until the replica answers.
      connection.sendPieces(head, expectBody, this.queue, this.queuedBytes);
      return;
    }
    if (this.whole !== undefined) {
      connection.send(head, expectBody, chunked, this.whole, true);
      return;
    }
    if (this.wholeView !== undefined) {
      // Inside the onData call: written straight from uWS's bytes; `whole` keeps them for a retry.
      this.whole = connection.sendWhole(head, expectBody, chunked, this.wholeView);
      return;
    }
    this.sent = true;
    this.connection = connection;
    const queue = this.queue;
    this.queue = [];
    this.account.bytes -= this.queuedBytes;
    this.queuedBytes = 0;
    let ok = connection.send(head, expectBody, chunked, queue[0], this.complete && queue.length <= 1);
    for (let i = 1; i < queue.length; i++) ok = connection.writeBody(queue[i], this.complete && i === queue.length - 1);
    if (!ok) this.block();
    else this.resumeIfRoom();
  }

  /** The connection took its backlog: let the caller send more. */
  onWritable(): void {
    if (!this.blocked) return;
    this.blocked = false;
    this.resumeIfRoom();
  }

  /** True if the body can be sent again (nothing of it has been written to a connection). */
  get resendable(): boolean {
    return this.whole !== undefined || this.wholeView !== undefined || !this.sent;
  }

  /**
   * With `-1` (a chunked body) from the caller's framing, the length the replica's head declares:
   * the body's, when it was held whole (docs/api.md#what-the-replica-receives), else `declared`.
   */
  get framedLength(): number {
    return this.heldWhole ? this.received : this.declared;
  }

  /** The replica's status line came: a held body is not sent again, and its memory goes back. */
  answered(): void {
    if (!this.heldWhole || this.stopped) return;
    this.dropQueue();
    this.sent = true;
  }

  /**
   * The held chunked body just grew by `size` bytes (or ended, `isLast`): true when the hold ends
   * now — the body is complete, passed the bound, or the service's account is full (it then
   * streams on, as a body past its bound). The caller then dispatches the request.
   */
  private holdEnds(isLast: boolean, size: number): boolean {
    const bytes = this.queuedBytes;
    // A body that is read may fill the account up to its own bound (one whole first part).
    if (!isLast && bytes <= this.holdBound && this.account.bytes <= Math.max(this.account.maxBytes, this.reader === undefined ? 0 : this.holdBound)) return false;
    this.holding = false;
    this.heldWhole = isLast && bytes <= this.holdBound;
    this.heldBytes = this.heldWhole ? bytes : bytes - size;
    return true;
  }

  /** The queue is at its high-water mark. A hold has its own bound, but not while the request is queued. */
  private full(): boolean {
    return this.queuedBytes >= this.highWater && (!this.holding || this.inQueue);
  }

  private dropQueue(): void {
    this.account.bytes -= this.queuedBytes;
    this.queue = [];
    this.queuedBytes = 0;
  }

  /** The first onData call has come. */
  get hasStarted(): boolean {
    return this.started;
  }

  /**
   * What this request holds of its body now, from its first byte, as it is held (nothing is kept
   * or copied for this; valid until the next onData): the whole body, or the chunks that wait for
   * a connection. `final`: no more will be held (the body is complete, the caller is paused at the
   * high-water mark, or what arrived was already sent on).
   */
  held(): { chunks: readonly Buffer[]; final: boolean } {
    if (this.whole !== undefined) return { chunks: [this.whole], final: true };
    if (this.sent || this.stopped) return { chunks: [], final: true };
    return { chunks: this.queue, final: this.complete || this.paused };
  }

  /** The request waits for a replica: keep at most HOLD_HIGH_WATER bytes, then pause the caller. */
  hold(): void {
    this.highWater = HOLD_HIGH_WATER;
    this.inQueue = true;
    if (!this.complete && this.full()) this.pause();
  }

  /** A replica was assigned: let the bytes flow again (up to the queue's high-water mark). */
  release(): void {
    this.highWater = QUEUE_HIGH_WATER;
    this.inQueue = false;
    this.resumeIfRoom();
  }

  /**
   * True when an answer ending now would leave more of the body unread than Sluice reads after it
   * (see `endUpload`): the answer should say `Connection: close`.
   */
  get closesAfterAnswer(): boolean {
    return !this.complete && !this.stopped && !this.drainable();
  }

  /**
   * The answer is about to end, or an error answers the request: the rest of the body is not
   * wanted. Call it while the response is still open. Returns true when the connection must close
   * after the answer.
   *
   * - Nothing left, or a declared rest of at most DRAIN_MAX_BYTES: a socket paused for the body is
   *   resumed (our own pause, undone before the end, fact 9) so uWS reads past the rest and drops
   *   it, and the connection serves the caller's next request.
   * - Otherwise (a chunked body, or more left): the socket is paused, or stays paused, so nothing
   *   more is read; the answer is complete in the caller's buffer at once, and uWS's idle timer
   *   closes the connection about 10 s later. Closing at once instead would reset the connection
   *   with the caller's bytes unread, and the reset can destroy the answer before a caller that
   *   is still writing reads it; reading on has no end when a caller keeps sending.
   */
  endUpload(): boolean {
    if (this.stopped) return false;
    const paused = this.paused;
    const drain = this.complete || this.drainable();
    this.stop();
    if (drain) {
      if (paused) this.res.resume();
      return false;
    }
    if (!paused) this.res.pause();
    return true;
  }

  /** The rest of the body is declared and small enough to read and drop after the answer. */
  private drainable(): boolean {
    return this.declared >= 0 && this.declared - this.received <= DRAIN_MAX_BYTES;
  }

  /**
   * The request is over: drop everything and write nothing more upstream. Never touches the
   * socket (the response may have ended, or the caller gone); call `endUpload` first if it is open.
   */
  stop(): void {
    if (!this.stopped) this.dropQueue();
    this.stopped = true;
    this.paused = false;
    this.connection = undefined;
  }

  private block(): void {
    this.blocked = true;
    this.pause();
  }

  private pause(): void {
    // Nothing more to read once the last byte is in: a paused socket would only stall the connection.
    if (this.paused || this.stopped || this.complete) return;
    this.paused = true;
    this.res.pause();
  }

  private resumeIfRoom(): void {
    // Only undo our own pause, never after the response ended (fact 9): the relay ends the upload first.
    if (!this.paused || this.stopped || this.blocked || this.full()) return;
    this.paused = false;
    this.res.resume();
  }
}
