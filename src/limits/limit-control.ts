// The control plane's side of the limit table (docs/architecture.md#the-limit-table):
// what the main thread and a reload write into the cells and read out of them, off the request path.
// The data planes' side — admitting, reserving, ending a request — is limit-table.ts's `LimitTable`,
// a sibling view over the same memory (limit-memory.ts). The cells: limit-layout.ts; the shared
// store's fields: store/store-cells.ts.
//
// - A cell set given to another token (`clear`): its counts start from nothing and its generation
//   is bumped, so a request that ends after its token was removed leaves the new owner's counts
//   alone (`generation`: what a thread notes when it learns of the token).
// - A worker thread that dies without ending its requests gives back what they held of
//   `concurrent` and of the reservations (`reclaim`), as the slot table does.
// - GCRA's TATs wrap in an Int32 of ticks (differences taken `| 0`, exact within ±2.3 hours):
//   `sweep` keeps idle TATs no more than an hour behind.
// - What a token uses (`use`, /status) and its refusals per limit (`refusals`,
//   sluice_rate_limited_total).
// - Per data plane thread, the last reload of the tokens it applied (`applied`): a cell set whose
//   token a reload removed is given to another token only once every thread applied that reload
//   and the cell set is idle (limit-cells.ts), so no request moves counts from one token to another.
import type { LimitsConfig } from '../config/types.js';
import { dayOf, monthOf, monthStartAt, nextDayAt } from './calendar-window.js';
import { BUCKETS, CELL_SETS, clock, DAY, EPOCH_S, GEN, HEADER, INFLIGHT, LOCAL, MONTH, REFUSED, REMOTE, REMOTE_DAY, REMOTE_MONTH, RESERVED, STORE, STRIDE, TAT, THREADS, TICKS_PER_MS, WINDOW_TICKS } from './limit-layout.js';
import { LimitMemory } from './limit-memory.js';
import { bucketCount, windowSum } from './token-window.js';

/** `sweep` pulls a TAT older than this forward (well within the ±2.3 hours an Int32 of ticks spans). */
const STALE_TICKS = 3_600_000 * TICKS_PER_MS;

/** What a limited token uses now (`/status`). */
export interface LimitUse {
  requestsPerMinute?: { limit: number; used: number };
  concurrent?: { limit: number; used: number };
  tokensPerMinute?: { limit: number; used: number; reserved: number };
  /** `resetsAt`: when the window's count starts again from 0 (ISO 8601, UTC). */
  tokensPerDay?: { limit: number; used: number; reserved: number; resetsAt: string };
  tokensPerMonth?: { limit: number; used: number; reserved: number; resetsAt: string };
}

/** The limit table as the control plane uses it (the main thread's own view). */
export class LimitControl extends LimitMemory {
  /** Whether every data plane thread has applied reload `reload` or a later one. */
  appliedEverywhere(reload: number): boolean {
    const at = this.appliedAt;
    for (let thread = 0; thread < this.a[THREADS]!; thread++) if (Atomics.load(this.a, at + thread) < reload) return false;
    return true;
  }

  /** Whether no request holds anything of `cell` (no place, no reservation). */
  idle(cell: number): boolean {
    const at = HEADER + cell * STRIDE;
    return Atomics.load(this.a, at + INFLIGHT) === 0 && Atomics.load(this.a, at + RESERVED) === 0;
  }

  private now(): number {
    return ((clock() - this.base) * TICKS_PER_MS) | 0;
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
      // With a shared store, what the other gateways counted too.
      const settled = Atomics.load(a, at + REMOTE) + windowSum(this.a, at + BUCKETS, Math.floor(clock() / 1000) - EPOCH_S);
      use.tokensPerMinute = { limit: limits.tokensPerMinute, used: settled + reserved, reserved };
    }
    if (limits.tokensPerDay !== undefined || limits.tokensPerMonth !== undefined) {
      const nowMs = clock();
      const reserved = Atomics.load(a, at + RESERVED);
      const shared = Atomics.load(a, STORE) !== LOCAL;
      if (limits.tokensPerDay !== undefined) {
        const day = dayOf(nowMs);
        const settled = bucketCount(a, at + DAY, day) + (shared ? bucketCount(a, at + REMOTE_DAY, day) : 0);
        use.tokensPerDay = { limit: limits.tokensPerDay, used: settled + reserved, reserved, resetsAt: new Date(nextDayAt(nowMs)).toISOString() };
      }
      if (limits.tokensPerMonth !== undefined) {
        const month = monthOf(nowMs);
        const settled = bucketCount(a, at + MONTH, month) + (shared ? bucketCount(a, at + REMOTE_MONTH, month) : 0);
        use.tokensPerMonth = { limit: limits.tokensPerMonth, used: settled + reserved, reserved, resetsAt: new Date(monthStartAt(month + 1)).toISOString() };
      }
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

  /** Pulls the TATs of `cells` that are more than an hour behind forward (the control plane, once a minute). */
  sweep(cells: Iterable<number>): void {
    const now = this.now();
    for (const cell of cells) {
      const at = HEADER + cell * STRIDE + TAT;
      const tat = Atomics.load(this.a, at);
      if (((tat - now) | 0) < -STALE_TICKS) Atomics.compareExchange(this.a, at, tat, (now - STALE_TICKS) | 0);
    }
  }
}
