// The caller's request body, from uWS onData to the replica, with backpressure both ways.
// A body that arrives whole in the first onData call (most inference requests, fact 11) becomes one
// Buffer that undici sends as is. Anything else streams: chunks are copied (fact 3), queued, and
// pulled by undici through a Readable; the caller's socket is paused while the queue is full or
// no replica has been assigned yet, so a body is never held in memory whole.
import { Readable } from 'node:stream';
import type { HttpResponse } from 'uWebSockets.js';

/** How many bytes may wait for the replica before the caller's socket is paused. */
const QUEUE_HIGH_WATER = 256 * 1024;
/**
 * The same while the request waits in the service's queue: lower, since a thousand requests may
 * wait. The socket is not paused below it, so a caller that leaves while queued is noticed at
 * once (a paused socket is not read, and its close would only be seen on resume).
 */
const HOLD_HIGH_WATER = 64 * 1024;
/** How many chunks the stream handed to undici may hold (each at most one uWS read). */
const READER_HIGH_WATER_CHUNKS = 4;

export interface CallerBodyListener {
  /** The first bytes (or the whole body) are here: the request can be dispatched. */
  onBodyStart(): void;
  /** The body crossed the service's `maxRequestBytes`. */
  onBodyTooLarge(): void;
}

class BodyReadable extends Readable {
  constructor(private readonly body: CallerBody) {
    // Object mode, counting chunks: undici then never infers a Content-Length from a stream that
    // has already ended (it does for byte streams), so a chunked caller body stays chunked.
    super({ objectMode: true, highWaterMark: READER_HIGH_WATER_CHUNKS });
  }

  override _read(): void {
    this.body.pull(this);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.body.detach(this);
    callback(error);
  }
}

export class CallerBody {
  /** Bytes received from the caller so far. */
  received = 0;
  /** The last byte has arrived. */
  complete = false;
  /** The whole body, when it arrived in a single onData call before anything was streamed. */
  whole: Buffer | undefined = undefined;

  private queue: Buffer[] = [];
  private queuedBytes = 0;
  private reader: BodyReadable | undefined = undefined;
  /** A reader asked for more and got nothing yet: push straight to it. */
  private wanted = false;
  /** Bytes have left the queue for a reader: the body cannot be sent again (no retry). */
  private consumed = false;
  private paused = false;
  private stopped = false;
  private highWater = QUEUE_HIGH_WATER;
  private started = false;

  constructor(
    private readonly res: HttpResponse,
    private readonly limit: number,
    private readonly listener: CallerBodyListener,
  ) {}

  /** The uWS onData callback's work. `data` is only valid during the call (fact 3). */
  onData(data: ArrayBuffer, isLast: boolean): void {
    if (this.stopped) return;
    const size = data.byteLength;
    this.received += size;
    if (this.received > this.limit) {
      this.stop();
      this.listener.onBodyTooLarge();
      return;
    }
    if (isLast) this.complete = true;
    if (!this.started && isLast) {
      this.started = true;
      this.whole = size === 0 ? Buffer.alloc(0) : Buffer.copyBytesFrom(new Uint8Array(data));
      this.listener.onBodyStart();
      return;
    }
    if (size > 0) {
      this.queue.push(Buffer.copyBytesFrom(new Uint8Array(data)));
      this.queuedBytes += size;
    }
    if (this.wanted && this.reader !== undefined) this.pull(this.reader);
    else if (isLast && this.reader !== undefined && this.queue.length === 0) this.reader.push(null);
    if (!isLast && this.queuedBytes >= this.highWater) this.pause();
    if (!this.started) {
      this.started = true;
      this.listener.onBodyStart();
    }
  }

  /**
   * What undici sends: the whole Buffer, or a fresh stream over the queued and coming chunks.
   * A whole body the caller sent chunked goes as a one-element iterable, which undici frames
   * chunked as well (contract section 3: Content-Length only when the caller sent one).
   */
  upstreamBody(chunked: boolean): Buffer | Readable {
    if (this.whole !== undefined) return chunked ? ([this.whole] as unknown as Readable) : this.whole;
    if (this.reader !== undefined) this.reader.destroy();
    this.reader = new BodyReadable(this);
    return this.reader;
  }

  /** True if the body can be sent again (nothing of it has been handed to a connection). */
  get resendable(): boolean {
    return this.whole !== undefined || !this.consumed;
  }

  /** The first onData call has come. */
  get hasStarted(): boolean {
    return this.started;
  }

  /** The request waits for a replica: keep at most HOLD_HIGH_WATER bytes, then pause the caller. */
  hold(): void {
    this.highWater = HOLD_HIGH_WATER;
    if (!this.complete && this.queuedBytes >= this.highWater) this.pause();
  }

  /** A replica was assigned: let the bytes flow again (up to the queue's high-water mark). */
  release(): void {
    this.highWater = QUEUE_HIGH_WATER;
    this.resumeIfRoom();
  }

  /** Moves queued chunks into the reader while it accepts them. Called by the reader's _read. */
  pull(reader: BodyReadable): void {
    if (reader !== this.reader) return;
    this.wanted = false;
    while (this.queue.length > 0) {
      const chunk = this.queue.shift()!;
      this.queuedBytes -= chunk.length;
      this.consumed = true;
      if (!reader.push(chunk)) {
        this.resumeIfRoom();
        return;
      }
    }
    if (this.complete) {
      reader.push(null);
      return;
    }
    this.wanted = true;
    this.resumeIfRoom();
  }

  /** The reader was destroyed (request ended or failed). */
  detach(reader: BodyReadable): void {
    if (reader === this.reader) {
      this.reader = undefined;
      this.wanted = false;
    }
  }

  /**
   * The rest of the body is not wanted (the answer is about to end, or an error answers it): it is
   * discarded as it arrives. Call it while the response is still open: a paused socket is resumed
   * (our own pause, undone before the end, fact 9) so uWS can read past the rest of the body and
   * the connection stays usable. The stream undici reads is left to end with the request.
   */
  discard(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.queue = [];
    this.queuedBytes = 0;
    if (this.paused) this.res.resume();
    this.paused = false;
  }

  /**
   * The request is over: drop everything and end the stream undici reads. Never touches the
   * socket (the response may have ended, or the caller gone); call `discard` first if it is open.
   */
  stop(): void {
    this.stopped = true;
    this.queue = [];
    this.queuedBytes = 0;
    this.paused = false;
    if (this.reader !== undefined) this.reader.destroy();
  }

  private pause(): void {
    // Nothing more to read once the last byte is in: a paused socket would only stall the connection.
    if (this.paused || this.stopped || this.complete) return;
    this.paused = true;
    this.res.pause();
  }

  private resumeIfRoom(): void {
    // Only undo our own pause, never after the response ended (fact 9): the relay discards first.
    if (!this.paused || this.stopped || this.queuedBytes >= this.highWater) return;
    this.paused = false;
    this.res.resume();
  }
}
