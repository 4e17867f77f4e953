// The limits per caller, in memory every thread of the gateway shares (docs/architecture.md#the-limit-table):
// one cell set per limited (service, token), in one SharedArrayBuffer, read and written with
// Atomics, so a limit holds exactly across worker threads with no message per request.
//
// - requestsPerMinute: GCRA. One theoretical arrival time (TAT) per cell set, in ticks of 1/256 ms
//   since the table's base time, wrapping in an Int32 (differences are taken `| 0`, exact while they
//   stay within ±2.3 hours: `sweep` keeps idle TATs no more than an hour behind). A request is
//   admitted while TAT − now ≤ (limit − 1) × T, T = 60 s / limit; admitting moves TAT to
//   max(TAT, now) + T with one compare-exchange.
// - concurrent: requests in flight, queued ones included: compare-exchange up to the limit, one
//   decrement at the request's end.
// - tokensPerMinute: settled tokens in 60 one-second buckets (its second, its count) plus the
//   reservations of requests still running; admitted while their sum is below the limit.
// - Refusals per limit (sluice_rate_limited_total) and a generation, bumped each time a cell set
//   is given to another token, so a request that ends after its token was removed leaves the new
//   owner's counts alone.
// - Per thread and cell set, what that thread's requests hold of `concurrent` and of the
//   reservations, so that a worker thread that dies without ending its requests gives them back
//   (`reclaim`), as the slot table does.
import type { LimitsConfig } from '../config/types.js';

/** The limits a request can be refused by, in the order they are checked; also the refusal counters' order. */
export const LIMIT_NAMES = ['concurrent', 'requestsPerMinute', 'tokensPerMinute'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

const TICKS_PER_MS = 256;
const WINDOW_S = 60;
const WINDOW_TICKS = WINDOW_S * 1000 * TICKS_PER_MS;
/** `sweep` pulls a TAT older than this forward (well within the ±2.3 hours an Int32 of ticks spans). */
const STALE_TICKS = 3_600_000 * TICKS_PER_MS;
const EPOCH_S = 1_577_836_800; // 2020-01-01: seconds fit an Int32 for decades
/** A bucket being reset to a new second. */
const RESETTING = -1;

// The header: the base time (a Float64 in words 0 and 1), the threads, the cell sets; written
// once before the buffer is shared.
const THREADS = 2;
const CELL_SETS = 3;
const HEADER = 16;
// A cell set's fields.
const TAT = 0;
const INFLIGHT = 1;
const RESERVED = 2;
const GEN = 3;
const REFUSED = 4; // three counters, in LIMIT_NAMES order
const BUCKETS = 8; // WINDOW_S × (second, count)
const STRIDE = BUCKETS + 2 * WINDOW_S;

function clock(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * A table for `cellSets` limited (service, token) pairs and `threads` data plane threads: once per
 * gateway start, shared by every thread.
 */
export function createLimitBuffer(cellSets: number, threads: number): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(4 * (HEADER + cellSets * STRIDE + threads * cellSets * 2));
  new Float64Array(buffer, 0, 1)[0] = clock();
  const a = new Int32Array(buffer);
  a[THREADS] = threads;
  a[CELL_SETS] = cellSets;
  return buffer;
}

/** One limited token as a thread sees it: its cell set and what it may use. */
export interface TokenLimit {
  readonly cell: number;
  /** The cell set's generation when this thread learnt of it. */
  readonly gen: number;
  readonly limits: LimitsConfig;
  /** The `RateLimit-Policy` value of its answers (rate-limit-headers.ts). */
  readonly policy: string;
}

/** What a limited token uses now (`/status`). */
export interface LimitUse {
  requestsPerMinute?: { limit: number; used: number };
  concurrent?: { limit: number; used: number };
  tokensPerMinute?: { limit: number; used: number; reserved: number };
}

export class LimitTable {
  private readonly a: Int32Array;
  private readonly base: number;
  /** Where this thread's holds begin (per cell set: concurrent places, reserved tokens). */
  private readonly holds: number;
  /** After a refusal by `admit`: the limit, and whole seconds until a request of the token would be admitted. */
  refusedBy: LimitName = 'concurrent';
  retryAfter = 0;
  /** After `admit`: what is left of each limit (`RateLimit` values, rate-limit-headers.ts). */
  leftRequests = 0;
  resetRequestsS = 0;
  leftConcurrent = 0;
  leftTokens = 0;
  resetTokensS = 0;

  /** `thread`: the data plane thread this object counts for (its row of holds). */
  constructor(buffer: SharedArrayBuffer, thread = 0) {
    this.a = new Int32Array(buffer);
    this.base = new Float64Array(buffer, 0, 1)[0]!;
    this.holds = this.holdsOf(thread);
  }

  get cellSets(): number {
    return this.a[CELL_SETS]!;
  }

  private holdsOf(thread: number): number {
    return HEADER + this.a[CELL_SETS]! * STRIDE + thread * this.a[CELL_SETS]! * 2;
  }

  private now(): number {
    return ((clock() - this.base) * TICKS_PER_MS) | 0;
  }

  /**
   * Admits a request of `t` or names the limit that refuses it (then `retryAfter` says when to
   * come back). An admitted request holds a place of `concurrent` until `end`.
   */
  admit(t: TokenLimit): LimitName | undefined {
    const a = this.a;
    const at = HEADER + t.cell * STRIDE;
    const { requestsPerMinute: rpm, concurrent, tokensPerMinute: tpm } = t.limits;
    const nowMs = clock();
    if (tpm !== undefined) {
      const second = Math.floor(nowMs / 1000) - EPOCH_S;
      const counted = this.windowSum(at, second) + Atomics.load(a, at + RESERVED);
      if (counted >= tpm) return this.refuse(at, 2, this.tokensRetryAfter(at, second, tpm));
      this.leftTokens = tpm - counted;
      this.resetTokensS = this.oldestLeavesIn(at, second);
    }
    if (concurrent !== undefined) {
      let v = Atomics.load(a, at + INFLIGHT);
      for (;;) {
        if (v >= concurrent) return this.refuse(at, 0, 1);
        const seen = Atomics.compareExchange(a, at + INFLIGHT, v, v + 1);
        if (seen === v) break;
        v = seen;
      }
      Atomics.add(a, this.holds + 2 * t.cell, 1);
      this.leftConcurrent = concurrent - v - 1;
    }
    if (rpm !== undefined) {
      const interval = Math.round(WINDOW_TICKS / rpm);
      const tolerance = (rpm - 1) * interval;
      const now = ((nowMs - this.base) * TICKS_PER_MS) | 0;
      let tat = Atomics.load(a, at + TAT);
      for (;;) {
        const ahead = Math.max(0, (tat - now) | 0);
        if (ahead > tolerance) {
          if (concurrent !== undefined) {
            Atomics.sub(a, this.holds + 2 * t.cell, 1);
            Atomics.sub(a, at + INFLIGHT, 1);
          }
          return this.refuse(at, 1, Math.max(1, Math.ceil((ahead - tolerance) / TICKS_PER_MS / 1000)));
        }
        const seen = Atomics.compareExchange(a, at + TAT, tat, (now + ahead + interval) | 0);
        if (seen === tat) {
          const after = ahead + interval;
          this.leftRequests = after > tolerance ? 0 : Math.floor((tolerance - after) / interval) + 1;
          this.resetRequestsS = Math.ceil(after / TICKS_PER_MS / 1000);
          break;
        }
        tat = seen;
      }
    }
    return undefined;
  }

  /** Adds `tokens` to the reservations of `t`'s running requests (its body's `max_tokens`). */
  reserve(t: TokenLimit, tokens: number): void {
    if (tokens <= 0 || !this.current(t)) return;
    Atomics.add(this.a, this.holds + 2 * t.cell + 1, tokens);
    Atomics.add(this.a, HEADER + t.cell * STRIDE + RESERVED, tokens);
  }

  /**
   * The end of an admitted request of `t`, however it ended, exactly once: its place of
   * `concurrent` given back, its reservation replaced by the `used` tokens it settled with.
   */
  end(t: TokenLimit, reserved: number, used: number): void {
    if (!this.current(t)) return;
    const a = this.a;
    const at = HEADER + t.cell * STRIDE;
    if (t.limits.concurrent !== undefined) {
      Atomics.sub(a, this.holds + 2 * t.cell, 1);
      Atomics.sub(a, at + INFLIGHT, 1);
    }
    if (reserved > 0) {
      Atomics.sub(a, this.holds + 2 * t.cell + 1, reserved);
      Atomics.sub(a, at + RESERVED, reserved);
    }
    if (used > 0 && t.limits.tokensPerMinute !== undefined) this.settle(at, Math.floor(clock() / 1000) - EPOCH_S, used);
  }

  /** The refusals of the cell set by each limit, in LIMIT_NAMES order (sluice_rate_limited_total). */
  refusals(cell: number, limit: number): number {
    return Atomics.load(this.a, HEADER + cell * STRIDE + REFUSED + limit) >>> 0;
  }

  /** What the token on `cell` uses of `limits` now. */
  use(cell: number, limits: LimitsConfig): LimitUse {
    const a = this.a;
    const at = HEADER + cell * STRIDE;
    const use: LimitUse = {};
    const rpm = limits.requestsPerMinute;
    if (rpm !== undefined) {
      const interval = Math.round(WINDOW_TICKS / rpm);
      const ahead = Math.max(0, (Atomics.load(a, at + TAT) - this.now()) | 0);
      use.requestsPerMinute = { limit: rpm, used: Math.min(rpm, Math.ceil(ahead / interval)) };
    }
    if (limits.concurrent !== undefined) use.concurrent = { limit: limits.concurrent, used: Atomics.load(a, at + INFLIGHT) };
    if (limits.tokensPerMinute !== undefined) {
      const reserved = Atomics.load(a, at + RESERVED);
      const settled = this.windowSum(at, Math.floor(clock() / 1000) - EPOCH_S);
      use.tokensPerMinute = { limit: limits.tokensPerMinute, used: settled + reserved, reserved };
    }
    return use;
  }

  /** The control plane gives `cell` to another token: its counts start from nothing. */
  clear(cell: number): void {
    const a = this.a;
    const at = HEADER + cell * STRIDE;
    Atomics.add(a, at + GEN, 1);
    Atomics.store(a, at + TAT, this.now());
    for (let i = INFLIGHT; i < STRIDE; i++) if (i !== GEN) Atomics.store(a, at + i, 0);
    for (let thread = 0; thread < a[THREADS]!; thread++) {
      const hold = this.holdsOf(thread) + 2 * cell;
      Atomics.store(a, hold, 0);
      Atomics.store(a, hold + 1, 0);
    }
  }

  /**
   * Gives back what the requests of `thread` (a worker that died) held of every token's
   * `concurrent` and reservations; returns the concurrent places given back.
   */
  reclaim(thread: number): number {
    const a = this.a;
    const holds = this.holdsOf(thread);
    let given = 0;
    for (let cell = 0; cell < a[CELL_SETS]!; cell++) {
      const at = HEADER + cell * STRIDE;
      const places = Atomics.exchange(a, holds + 2 * cell, 0);
      const tokens = Atomics.exchange(a, holds + 2 * cell + 1, 0);
      if (places !== 0) Atomics.sub(a, at + INFLIGHT, places);
      if (tokens !== 0) Atomics.sub(a, at + RESERVED, tokens);
      given += places;
    }
    return given;
  }

  generation(cell: number): number {
    return Atomics.load(this.a, HEADER + cell * STRIDE + GEN);
  }

  /** Pulls the TATs of `cells` that are more than an hour behind forward (the control plane, once a minute). */
  sweep(cells: Iterable<number>): void {
    const now = this.now();
    for (const cell of cells) {
      const at = HEADER + cell * STRIDE + TAT;
      const tat = Atomics.load(this.a, at);
      if (((tat - now) | 0) < -STALE_TICKS) Atomics.compareExchange(this.a, at, tat, (now - STALE_TICKS) | 0);
    }
  }

  private current(t: TokenLimit): boolean {
    return Atomics.load(this.a, HEADER + t.cell * STRIDE + GEN) === t.gen;
  }

  private refuse(at: number, limit: number, retryAfter: number): LimitName {
    Atomics.add(this.a, at + REFUSED + limit, 1);
    this.retryAfter = retryAfter;
    this.refusedBy = LIMIT_NAMES[limit]!;
    return this.refusedBy;
  }

  /** Settled tokens of the buckets within the window ending with `second`. */
  private windowSum(at: number, second: number): number {
    const a = this.a;
    let sum = 0;
    for (let i = 0; i < WINDOW_S; i++) {
      const b = at + BUCKETS + 2 * i;
      const s = Atomics.load(a, b);
      if (s > second - WINDOW_S && s <= second) sum += Atomics.load(a, b + 1);
    }
    return sum;
  }

  /** Seconds until the oldest settled bucket leaves the window (0: none). */
  private oldestLeavesIn(at: number, second: number): number {
    const a = this.a;
    let oldest = second + 1;
    for (let i = 0; i < WINDOW_S; i++) {
      const b = at + BUCKETS + 2 * i;
      const s = Atomics.load(a, b);
      if (s > second - WINDOW_S && s < oldest && Atomics.load(a, b + 1) > 0) oldest = s;
    }
    return oldest > second ? 0 : oldest + WINDOW_S - second;
  }

  /**
   * Whole seconds until the window, as its buckets leave it, counts below `limit` with the
   * reservations as they are now (at least 1; 1 when the reservations alone reach it: they go when
   * their requests end, which nothing here can tell).
   */
  private tokensRetryAfter(at: number, second: number, limit: number): number {
    const a = this.a;
    const reserved = Atomics.load(a, at + RESERVED);
    if (reserved >= limit) return 1;
    for (let k = 1; k <= WINDOW_S; k++) {
      if (this.windowSum(at, second + k) + reserved < limit) return k;
    }
    return WINDOW_S;
  }

  /** Adds `tokens` to the bucket of `second`, resetting it first if it still holds an older second. */
  private settle(at: number, second: number, tokens: number): void {
    const a = this.a;
    const b = at + BUCKETS + 2 * (second % WINDOW_S);
    for (;;) {
      const s = Atomics.load(a, b);
      if (s === second) {
        Atomics.add(a, b + 1, tokens);
        return;
      }
      if (s === RESETTING) continue; // another thread is starting this second: a store or two
      if (s > second) return; // a thread with a later clock moved on: these tokens are out of its window
      if (Atomics.compareExchange(a, b, s, RESETTING) === s) {
        Atomics.store(a, b + 1, tokens);
        Atomics.store(a, b, second);
        return;
      }
    }
  }
}
