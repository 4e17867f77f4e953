// The keep-alive connections to one replica: an idle list, new connections up to a limit (the
// service's concurrency), and a short FIFO of requests waiting for a connection when the limit is
// reached. A connection whose exchange completed is made reusable only after the next poll for
// I/O (two turns of setImmediate per pool and batch, not a timer per request): a FIN sent with
// the answer is read first — libuv stops reading a socket after a short read, so the FIN behind
// an answer is only seen on the next poll — and a request is never written to a connection the
// replica is closing.
//
// New connections are opened at most CONNECTS_PER_TURN per turn of the event loop; the others
// wait in `toOpen` for the next turns (setImmediate). A burst (a cold start hands hundreds of
// queued requests to a replica in one synchronous loop) would otherwise create every socket
// before the first connect() syscall — net.connect defers it to process.nextTick — and write the
// first request only after all of them: about 25–50 ms for 500. In batches, the first requests
// are written on the next poll for I/O while later sockets are still being created.
import { connectFailed, poolClosed } from './errors.js';
import { type ConnectionOwner, UpstreamConnection } from './connection.js';
import type { UpstreamHandler } from './handler.js';
import { ticksFor } from '../time/ticker.js';
import { CONNECTS_PER_TURN } from '../tunables.js';

export interface PoolOptions {
  /** Connections at most (0: no limit). */
  maxConnections: number;
  connectMs: number;
  headersMs: number;
  bodyIdleMs: number;
  /** Count requests that wait longer than this for their status line into `overdue` (0: not counted). */
  overdueMs?: number;
  /** Told each time a request becomes overdue (+1) and stops being so (-1). */
  overdue?: OverdueSink;
}

/** Where a pool counts its requests overdue for a status line (replica-view.ts: the shared slot table). */
export interface OverdueSink {
  overdue(delta: number): void;
}

export class UpstreamPool implements ConnectionOwner {
  readonly connectMs: number;
  readonly headersMs: number;
  readonly bodyIdleMs: number;
  readonly overdueTicks: number;
  private readonly sink: OverdueSink | undefined;
  private readonly limit: number;
  /** Every connection not closed. */
  private readonly all = new Set<UpstreamConnection>();
  /** Idle connections, most recently used last (reused first: the others may time out). */
  private readonly idleList: UpstreamConnection[] = [];
  /** Completed exchanges: released in this turn of the loop, and in the previous one. */
  private releasedList: UpstreamConnection[] = [];
  private maturingList: UpstreamConnection[] = [];
  private flushScheduled = false;
  /** Requests waiting for a connection (the limit was reached). */
  private readonly waiting: UpstreamHandler[] = [];
  /** Requests granted a new connection, opened on a later turn (counted against the limit). */
  private readonly toOpen: UpstreamHandler[] = [];
  /** Connections opened in this turn of the loop (reset by `openMore`). */
  private openedThisTurn = 0;
  private openScheduled = false;
  private closing = false;
  private onEmpty: (() => void) | undefined = undefined;

  constructor(
    readonly host: string,
    readonly port: number,
    options: PoolOptions,
  ) {
    this.limit = options.maxConnections > 0 ? options.maxConnections : Infinity;
    this.connectMs = options.connectMs;
    this.headersMs = options.headersMs;
    this.bodyIdleMs = options.bodyIdleMs;
    this.sink = options.overdue;
    this.overdueTicks = this.sink === undefined ? 0 : ticksFor(options.overdueMs ?? 0);
  }

  /** Open connections (connecting, busy, releasing or idle). */
  get size(): number {
    return this.all.size;
  }

  /** Requests granted a new connection that is not opened yet (a burst beyond CONNECTS_PER_TURN). */
  get opening(): number {
    return this.toOpen.length;
  }

  /**
   * Finds a connection for `handler`: an idle one (then `onUpstreamConnection` is called before
   * this returns), a new one (called once connected), or the next one freed. A pool that is
   * closed fails the request with a retryable error on the next turn.
   */
  request(handler: UpstreamHandler): void {
    if (this.closing) {
      process.nextTick(failClosed, handler);
      return;
    }
    const idle = this.idleList.pop();
    if (idle !== undefined) {
      idle.assign(handler);
      return;
    }
    if (this.all.size + this.toOpen.length < this.limit) this.startOpen(handler);
    else this.waiting.push(handler);
  }

  /** The request left before it got a connection: forget it (or close the connection being opened for it). */
  cancel(handler: UpstreamHandler): void {
    const i = this.waiting.indexOf(handler);
    if (i >= 0) {
      this.waiting.splice(i, 1);
      return;
    }
    const j = this.toOpen.indexOf(handler);
    if (j >= 0) {
      this.toOpen.splice(j, 1);
      this.openWaiting();
      return;
    }
    for (const c of this.all) {
      if (c.connecting && c.handler === handler) {
        c.abort();
        return;
      }
    }
  }

  /** Stops taking requests: idle connections close now, busy ones after their exchange. */
  close(): Promise<void> {
    this.closing = true;
    for (const handler of this.toOpen.splice(0)) process.nextTick(failClosed, handler);
    for (const handler of this.waiting.splice(0)) process.nextTick(failClosed, handler);
    for (const c of [...this.idleList]) c.destroy();
    if (this.all.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.onEmpty = resolve;
    });
  }

  /** Closes every connection now; exchanges in progress fail (not retried once bytes may have been sent). */
  destroy(): void {
    this.closing = true;
    for (const handler of this.toOpen.splice(0)) process.nextTick(failClosed, handler);
    for (const handler of this.waiting.splice(0)) process.nextTick(failClosed, handler);
    for (const c of [...this.all]) c.shutdown();
  }

  // ── ConnectionOwner ────────────────────────────────────────────────────────────────────────

  overdue(delta: number): void {
    this.sink?.overdue(delta);
  }

  released(connection: UpstreamConnection): void {
    if (this.closing) {
      connection.destroy();
      return;
    }
    this.releasedList.push(connection);
    this.scheduleFlush();
  }

  closed(connection: UpstreamConnection): void {
    this.all.delete(connection);
    const i = this.idleList.indexOf(connection);
    if (i >= 0) this.idleList.splice(i, 1);
    this.openWaiting();
    if (this.closing && this.all.size === 0 && this.onEmpty !== undefined) {
      const resolve = this.onEmpty;
      this.onEmpty = undefined;
      resolve();
    }
  }

  /** Room under the limit (a connection closed, a pending open was cancelled): the next waiting request gets a new connection. */
  private openWaiting(): void {
    if (this.waiting.length > 0 && !this.closing && this.all.size + this.toOpen.length < this.limit) this.startOpen(this.waiting.shift()!);
  }

  /** Opens a connection for `handler` now, or on a later turn if this turn has opened its share. */
  private startOpen(handler: UpstreamHandler): void {
    if (this.openedThisTurn < CONNECTS_PER_TURN && this.toOpen.length === 0) {
      this.openedThisTurn++;
      this.open(handler);
    } else {
      this.toOpen.push(handler);
    }
    if (!this.openScheduled) {
      this.openScheduled = true;
      setImmediate(this.openMore);
    }
  }

  /** Next turn: the count starts again, and the next batch of pending opens goes out. */
  private readonly openMore = (): void => {
    this.openScheduled = false;
    this.openedThisTurn = 0;
    if (this.toOpen.length === 0) return;
    if (this.closing) {
      for (const handler of this.toOpen.splice(0)) failClosed(handler);
      return;
    }
    const batch = this.toOpen.splice(0, CONNECTS_PER_TURN);
    this.openedThisTurn = batch.length;
    for (const handler of batch) this.open(handler);
    this.openScheduled = true;
    setImmediate(this.openMore);
  };

  private open(handler: UpstreamHandler): void {
    let connection: UpstreamConnection;
    try {
      connection = new UpstreamConnection(this, this.host, this.port, handler);
    } catch (err) {
      // Synchronous failures (an invalid port) are connect failures like any other.
      process.nextTick(failConnect, handler, err);
      return;
    }
    this.all.add(connection);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flush);
  }

  /** Runs once per loop turn while connections are being released: the previous turn's become reusable. */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    const ready = this.maturingList;
    this.maturingList = this.releasedList;
    this.releasedList = [];
    if (this.maturingList.length > 0) this.scheduleFlush();
    for (const c of ready) {
      if (!c.releasing) continue; // closed meanwhile (FIN, stray bytes)
      if (this.closing) {
        c.destroy();
        continue;
      }
      // A request granted a new connection that is not opened yet takes this one instead (it
      // came before any in `waiting`), and its room under the limit goes to the next waiting one.
      let next = this.toOpen.shift();
      if (next !== undefined) this.openWaiting();
      else next = this.waiting.shift();
      if (next !== undefined) {
        c.assign(next);
      } else {
        c.makeIdle();
        this.idleList.push(c);
      }
    }
  };
}

function failClosed(handler: UpstreamHandler): void {
  handler.onUpstreamError(poolClosed());
}

function failConnect(handler: UpstreamHandler, err: unknown): void {
  handler.onUpstreamError(connectFailed(err instanceof Error ? err : new Error(String(err))));
}
