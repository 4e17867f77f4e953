// The limits per caller as a request meets them (docs/architecture.md#the-limit-table): one cell
// set per limited (service, token), in one SharedArrayBuffer every thread of the gateway shares,
// read and written with Atomics, so a limit holds exactly across worker threads with no message
// per request. This is the request path's side (admit, end); what the control plane writes (a cell
// set cleared for another token, a dead thread's holds given back, idle TATs swept, a token's use
// read) is limit-control.ts, a sibling view over the same memory (limit-memory.ts); the cells:
// limit-layout.ts.
//
// - requestsPerMinute: GCRA. One theoretical arrival time (TAT) per cell set, in ticks of 1/256 ms
//   since the table's base time, wrapping in an Int32 (differences are taken `| 0`, exact while they
//   stay within ±2.3 hours: the control plane's `sweep` keeps idle TATs no more than an hour behind).
//   A request is admitted while TAT − now ≤ (limit − 1) × T, T = 60 s / limit; admitting moves TAT
//   to max(TAT, now) + T with one compare-exchange.
// - concurrent: requests in flight, queued ones included: compare-exchange up to the limit, one
//   decrement at the request's end. The requests of a token with tokensPerMinute are counted there
//   too (its `counted`), so that a cell set is known idle before it goes to another token.
// - tokensPerMinute: settled tokens in 60 one-second buckets (its second, its count) plus the
//   reservations of requests still running; admitted while their sum is below the limit, the
//   request's own reservation (its body's max_tokens, at most the limit) added in the same
//   compare-exchange. No count can wrap: a reservation is at most the limit (≤ 1e9), so the
//   reservations stay below twice it; a settlement saturates (token-window.ts).
// - tokensPerDay, tokensPerMonth: the tokens settled in the current calendar day or month in UTC
//   (one bucket each: calendar-window.ts) plus the same reservations, checked in the same
//   compare-exchange as tokensPerMinute; a refusal's Retry-After is the time to the next reset.
//   A token without them pays one boolean test (`long`) per admission and per end.
//   A request reserves its body's max_tokens at most its smallest token limit (`cap`).
// - Refusals per limit (sluice_rate_limited_total), and the generation a request was admitted
//   with: a request that ends after its cell set went to another token leaves its counts alone.
// - Per thread and cell set, what that thread's requests hold of `concurrent` and of the
//   reservations, so that a worker thread that dies without ending its requests gives them back.
// - With the shared store (`limits.store: redis://…`, docs/architecture.md#the-shared-store): what
//   this gateway holds of the store's counts, topped up by the control plane (limits/store/store-cells.ts):
//   requests leased of requestsPerMinute, slots of `concurrent`, tokens counted by other gateways.
//   A request that finds its lease empty rings the doorbell and may wait up to 50 ms for a top-up.
import type { LimitsConfig } from '../config/types.js';
import { LimitMemory } from './limit-memory.js';
import { Calendar, dayOf, nextDayAt, secondsUntil } from './calendar-window.js';
import { BUCKETS, clock, DAY, DOORBELL, EPOCH_S, EXHAUSTED, FULL, GEN, HEADER, INFLIGHT, LEASE, LEFT, LIMIT_NAMES, type LimitName, LOCAL, MONTH, NEED, REFUSE_WHEN_DOWN, REFUSED, REMOTE, REMOTE_DAY, REMOTE_MONTH, RESERVED, ROOM, SEQ, SLOTS, STORE, STORE_DOWN, STRIDE, TAT, TICKS_PER_MS, WINDOW_TICKS } from './limit-layout.js';
import { bucketCount, PastWindows, settle, settleBucket, tokensRetryAfter, WINDOW_S, windowRead } from './token-window.js';

/** The longest the shared store says a token's next request is away (one interval of GCRA, 60 s at most), with a margin. */
const MAX_EXHAUSTED_TICKS = 61_000 * TICKS_PER_MS;

/**
 * What `admit` may answer besides admitting (undefined) or naming the limit that refuses:
 * `wait`: the lease is empty and a top-up was asked for (wait with `topUp`, then `admit(t, true)`);
 * `unavailable`: the store cannot say and `onStoreDown` is `refuse` (503 limits_unavailable).
 */
export type Verdict = LimitName | 'wait' | 'unavailable' | undefined;

/** One limited token as a thread sees it: its cell set and what it may use. */
export interface TokenLimit {
  readonly cell: number;
  /** The cell set's generation when this thread learnt of it. */
  readonly gen: number;
  readonly limits: LimitsConfig;
  /** Its requests count in `inflight` (it has `concurrent` or a limit of tokens): `tokenLimit`. */
  readonly counted: boolean;
  /** It has tokensPerDay or tokensPerMonth. */
  readonly long: boolean;
  /** What a request reserves at most: its smallest limit of tokens (0: it has none, nothing is reserved). */
  readonly cap: number;
  /** The `RateLimit-Policy` value of its answers (rate-limit-headers.ts). */
  readonly policy: string;
  /** With the shared store: the requests of requestsPerMinute leased at a time (`leaseShare`). */
  readonly share: number;
}

/**
 * The requests of a requestsPerMinute limit that a gateway leases from the shared store at a time:
 * 1/200 of the limit, at least 1 (docs/architecture.md#the-shared-store: the overshoot bound).
 */
export function leaseShare(requestsPerMinute: number | undefined): number {
  return requestsPerMinute === undefined ? 0 : Math.max(1, Math.floor(requestsPerMinute / 200));
}

/** A token's limits on cell set `cell` as a thread holds them (its generation read now). */
export function tokenLimit(table: LimitMemory, cell: number, limits: LimitsConfig, policy: string): TokenLimit {
  const long = limits.tokensPerDay !== undefined || limits.tokensPerMonth !== undefined;
  const cap = Math.min(limits.tokensPerMinute ?? Infinity, limits.tokensPerDay ?? Infinity, limits.tokensPerMonth ?? Infinity);
  const counted = limits.concurrent !== undefined || cap !== Infinity;
  return { cell, gen: table.generation(cell), limits, counted, long, cap: cap === Infinity ? 0 : cap, policy, share: leaseShare(limits.requestsPerMinute) };
}

/** The limit table as a data plane thread uses it: the request path (the control plane's side: limit-control.ts, a sibling view). */
export class LimitTable extends LimitMemory {
  /** Where this thread's holds begin (per cell set: concurrent places, reserved tokens). */
  private readonly holds: number;
  /** This thread's sums of the tokensPerMinute windows' past seconds (token-window.ts). */
  private readonly past: PastWindows;
  /** After a refusal by `admit`: the limit, and whole seconds until a request of the token would be admitted. */
  refusedBy: LimitName = 'concurrent';
  retryAfter = 0;
  /** After `admit`: what is left of each limit (`RateLimit` values, rate-limit-headers.ts). */
  leftRequests = 0;
  resetRequestsS = 0;
  leftConcurrent = 0;
  leftTokens = 0;
  resetTokensS = 0;
  leftDay = 0;
  resetDayS = 0;
  leftMonth = 0;
  resetMonthS = 0;
  /** This thread's current month and its bounds (calendar-window.ts). */
  private readonly calendar = new Calendar();
  /** Set by `readLong`: the tokens of the current day and month counted (settled here, counted by other gateways). */
  private daySettled = 0;
  private monthSettled = 0;

  /** `thread`: the data plane thread this object counts for (its row of holds). */
  constructor(buffer: SharedArrayBuffer, thread = 0) {
    super(buffer);
    this.holds = this.holdsOf(thread);
    this.past = new PastWindows(this.cellSets);
  }

  /**
   * Admits a request of `t` that reserves `reservation` tokens (its body's, at most its `cap`:
   * 0 without a limit of tokens), or names the limit that refuses it (then `retryAfter` says
   * when to come back). An admitted request holds its place and its reservation until `end`. With
   * the shared store, `wait` (see Verdict) until the request's wait is over (`waited`).
   */
  admit(t: TokenLimit, waited = false, reservation = 0): Verdict {
    const a = this.a;
    const at = HEADER + t.cell * STRIDE;
    const store = Atomics.load(a, STORE);
    if (store !== LOCAL) {
      if (store === STORE_DOWN) return this.unavailable(t, reservation);
      this.seq = Atomics.load(a, at + SEQ);
    }
    const { requestsPerMinute: rpm, concurrent, tokensPerMinute: tpm } = t.limits;
    const nowMs = clock();
    if (tpm !== undefined || t.long) {
      let settled = 0;
      let second = 0;
      if (tpm !== undefined) {
        second = Math.floor(nowMs / 1000) - EPOCH_S;
        this.past.read(a, at + BUCKETS, t.cell, Atomics.load(a, at + GEN), second, nowMs % 1000);
        settled = windowRead.sum + Atomics.load(a, at + REMOTE);
      }
      if (t.long) this.readLong(at, nowMs, store);
      let reserved = Atomics.load(a, at + RESERVED);
      for (;;) {
        if (tpm !== undefined) {
          const counted = settled + reserved;
          if (counted >= tpm) return this.refuse(at, 2, tokensRetryAfter(this.a, at + BUCKETS, second, tpm, reserved + Atomics.load(this.a, at + REMOTE)));
          this.leftTokens = Math.max(0, tpm - counted - reservation);
        }
        if (t.long) {
          const over = this.overLong(t, at, nowMs, reserved, reservation);
          if (over !== undefined) return over;
        }
        if (reservation === 0) break;
        // Below the limits before this request: its reservation is taken in the same step.
        const seen = Atomics.compareExchange(a, at + RESERVED, reserved, reserved + reservation);
        if (seen === reserved) break;
        reserved = seen;
      }
      this.resetTokensS = windowRead.oldestLeavesIn;
    }
    if (concurrent !== undefined) {
      let v = Atomics.load(a, at + INFLIGHT);
      for (;;) {
        if (v >= concurrent) return this.refuse(at, 0, 1, reservation);
        if (store !== LOCAL && v >= Atomics.load(a, at + SLOTS)) {
          if (Atomics.load(a, at + FULL) === 1) return this.refuse(at, 0, 1, reservation);
          this.unreserve(at, reservation);
          return this.short(t, at, waited, reservation);
        }
        const seen = Atomics.compareExchange(a, at + INFLIGHT, v, v + 1);
        if (seen === v) break;
        v = seen;
      }
      // The control plane lowers SLOTS, then reads INFLIGHT: one of the two sees the other.
      if (store !== LOCAL && v + 1 > Atomics.load(a, at + SLOTS)) {
        Atomics.sub(a, at + INFLIGHT, 1);
        this.unreserve(at, reservation);
        return this.short(t, at, waited, reservation);
      }
      // With the store: within the places the other gateways left at the last sync.
      this.leftConcurrent = Math.max(0, (store === LOCAL ? concurrent : Math.min(concurrent, Atomics.load(a, at + ROOM))) - v - 1);
    } else if (t.counted) Atomics.add(a, at + INFLIGHT, 1);
    if (rpm !== undefined && store !== LOCAL) {
      let lease = Atomics.load(a, at + LEASE);
      for (;;) {
        if (lease <= 0) {
          this.giveBack(t, at, reservation);
          const until = Atomics.load(a, at + EXHAUSTED);
          const ahead = (until - (((nowMs - this.base) * TICKS_PER_MS) | 0)) | 0;
          // Within a minute only (the store's wait is at most 60/limit s): a time the control plane
          // has not cleared yet never reads as far ahead when the ticks wrap.
          if (until !== 0 && ahead > 0 && ahead <= MAX_EXHAUSTED_TICKS) return this.refuse(at, 1, Math.max(1, Math.ceil(ahead / TICKS_PER_MS / 1000)));
          return this.short(t, at, waited, reservation);
        }
        const seen = Atomics.compareExchange(a, at + LEASE, lease, lease - 1);
        if (seen === lease) break;
        lease = seen;
      }
      // Half the share left: the top-up is asked for before the lease runs out (a share of 1, a
      // limit under 400 a minute, is asked for by each request: nothing is held that another
      // gateway could use).
      if (t.share > 1 && lease - 1 <= t.share >> 1) this.ring(at);
      // What the store would still grant plus this gateway's lease (other gateways' unused leases
      // aside: a little low, never high); whole again after one interval per request used, as GCRA.
      const left = Math.min(rpm, lease - 1 + Atomics.load(a, at + LEFT));
      this.leftRequests = left;
      this.resetRequestsS = Math.ceil(((rpm - left) * WINDOW_S) / rpm);
    } else if (rpm !== undefined) {
      const interval = Math.round(WINDOW_TICKS / rpm);
      const tolerance = (rpm - 1) * interval;
      const now = ((nowMs - this.base) * TICKS_PER_MS) | 0;
      let tat = Atomics.load(a, at + TAT);
      for (;;) {
        const ahead = Math.max(0, (tat - now) | 0);
        if (ahead > tolerance) {
          this.giveBack(t, at, reservation);
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
    this.hold(t, 1, reservation);
    return undefined;
  }

  /**
   * A request of a token with a limit of tokens, before its body is read: refused at once when
   * one of the token's windows is already at its limit (admitting it later could not succeed), or when the
   * shared store is down and `onStoreDown` is `refuse`. Takes nothing.
   */
  precheck(t: TokenLimit): Verdict {
    const a = this.a;
    const at = HEADER + t.cell * STRIDE;
    const store = Atomics.load(a, STORE);
    if (store === STORE_DOWN && Atomics.load(a, REFUSE_WHEN_DOWN) === 1) return 'unavailable';
    const tpm = t.limits.tokensPerMinute;
    const nowMs = clock();
    if (tpm !== undefined) {
      const second = Math.floor(nowMs / 1000) - EPOCH_S;
      this.past.read(a, at + BUCKETS, t.cell, Atomics.load(a, at + GEN), second, nowMs % 1000);
      const others = Atomics.load(a, at + RESERVED) + (store === LOCAL ? 0 : Atomics.load(a, at + REMOTE));
      if (windowRead.sum + others >= tpm) return this.refuse(at, 2, tokensRetryAfter(a, at + BUCKETS, second, tpm, others));
    }
    if (t.long) {
      this.readLong(at, nowMs, store);
      return this.overLong(t, at, nowMs, Atomics.load(a, at + RESERVED), 0);
    }
    return undefined;
  }

  /** Reads the tokens counted in the current calendar day and month of the cell set at `at` (`daySettled`, `monthSettled`). */
  private readLong(at: number, nowMs: number, store: number): void {
    const a = this.a;
    const day = dayOf(nowMs);
    this.calendar.at(nowMs);
    const month = this.calendar.month;
    this.daySettled = bucketCount(a, at + DAY, day);
    this.monthSettled = bucketCount(a, at + MONTH, month);
    if (store !== LOCAL) {
      this.daySettled += bucketCount(a, at + REMOTE_DAY, day);
      this.monthSettled += bucketCount(a, at + REMOTE_MONTH, month);
    }
  }

  /**
   * Refuses a request of `t` by tokensPerDay or tokensPerMonth when what they count with the
   * `reserved` tokens reaches the limit (Retry-After: the next reset); otherwise sets what is left
   * once `reservation` is taken.
   */
  private overLong(t: TokenLimit, at: number, nowMs: number, reserved: number, reservation: number): LimitName | undefined {
    const { tokensPerDay: perDay, tokensPerMonth: perMonth } = t.limits;
    if (perDay !== undefined) {
      const counted = this.daySettled + reserved;
      const reset = secondsUntil(nowMs, nextDayAt(nowMs));
      if (counted >= perDay) return this.refuse(at, 3, reset);
      this.leftDay = Math.max(0, perDay - counted - reservation);
      this.resetDayS = reset;
    }
    if (perMonth !== undefined) {
      const counted = this.monthSettled + reserved;
      const reset = secondsUntil(nowMs, this.calendar.monthEnd);
      if (counted >= perMonth) return this.refuse(at, 4, reset);
      this.leftMonth = Math.max(0, perMonth - counted - reservation);
      this.resetMonthS = reset;
    }
    return undefined;
  }

  /** The SEQ of the cell set that `admit` read last (what `topUp` waits to change). */
  private seq = 0;

  /**
   * After `admit` said `wait`: resolves when the control plane topped `t`'s cell set up, or after
   * `ms`; undefined when the top-up already came (admit again at once).
   */
  topUp(t: TokenLimit, ms: number): Promise<unknown> | undefined {
    const r = Atomics.waitAsync(this.a, HEADER + t.cell * STRIDE + SEQ, this.seq, ms);
    return r.async ? r.value : undefined;
  }

  /** A request of `t` that the store cannot decide on: admitted unlimited (`onStoreDown: allow`) or `unavailable`. */
  private unavailable(t: TokenLimit, reservation: number): Verdict {
    if (Atomics.load(this.a, REFUSE_WHEN_DOWN) === 1) return 'unavailable';
    // Counted, so that its end balances, but not limited.
    if (t.counted) Atomics.add(this.a, HEADER + t.cell * STRIDE + INFLIGHT, 1);
    if (reservation > 0) Atomics.add(this.a, HEADER + t.cell * STRIDE + RESERVED, reservation);
    this.hold(t, 1, reservation);
    this.leftRequests = this.leftConcurrent = this.leftTokens = 0;
    return undefined;
  }

  /**
   * The lease or the slots ran out (what admit took is given back): ask for a top-up and wait, or,
   * when the wait is over (`waited`), follow onStoreDown for a request that reserves `reservation`.
   */
  private short(t: TokenLimit, at: number, waited: boolean, reservation: number): Verdict {
    if (waited) return this.unavailable(t, reservation);
    this.ring(at);
    return 'wait';
  }

  /** Asks the control plane for a top-up of the cell set at `at` (the doorbell rings once until it looks). */
  private ring(at: number): void {
    if (Atomics.add(this.a, at + NEED, 1) !== 0) return;
    Atomics.add(this.a, DOORBELL, 1);
    Atomics.notify(this.a, DOORBELL);
  }

  /** A refusal after the place was taken: the place and the reservation given back. */
  private giveBack(t: TokenLimit, at: number, reservation: number): void {
    if (t.counted) Atomics.sub(this.a, at + INFLIGHT, 1);
    this.unreserve(at, reservation);
  }

  private unreserve(at: number, reservation: number): void {
    if (reservation > 0) Atomics.sub(this.a, at + RESERVED, reservation);
  }

  /** This thread's holds of `t`'s cell set: `places` (1 or -1 for a counted token) and `tokens` reserved. */
  private hold(t: TokenLimit, places: number, tokens: number): void {
    const at = this.holds + 2 * t.cell;
    if (t.counted) Atomics.add(this.a, at, places);
    if (tokens !== 0) Atomics.add(this.a, at + 1, tokens);
  }

  /**
   * The end of an admitted request of `t`, however it ended, exactly once: its place given back,
   * its reservation replaced by the `used` tokens it settled with.
   */
  end(t: TokenLimit, reserved: number, used: number): void {
    if (!this.current(t)) return;
    const a = this.a;
    const at = HEADER + t.cell * STRIDE;
    this.hold(t, -1, -reserved);
    if (t.counted) Atomics.sub(a, at + INFLIGHT, 1);
    if (reserved > 0) Atomics.sub(a, at + RESERVED, reserved);
    if (used <= 0 || t.cap === 0) return;
    const nowMs = clock();
    if (t.limits.tokensPerMinute !== undefined) settle(this.a, at + BUCKETS, Math.floor(nowMs / 1000) - EPOCH_S, used);
    if (t.long) {
      // Settled into the day and month the request ends in.
      if (t.limits.tokensPerDay !== undefined) settleBucket(this.a, at + DAY, dayOf(nowMs), used);
      if (t.limits.tokensPerMonth !== undefined) {
        this.calendar.at(nowMs);
        settleBucket(this.a, at + MONTH, this.calendar.month, used);
      }
    }
  }

  private current(t: TokenLimit): boolean {
    return Atomics.load(this.a, HEADER + t.cell * STRIDE + GEN) === t.gen;
  }

  /** Refused by limit `limit` (its index in LIMIT_NAMES), the `reservation` taken so far given back. */
  private refuse(at: number, limit: number, retryAfter: number, reservation = 0): LimitName {
    this.unreserve(at, reservation);
    Atomics.add(this.a, at + REFUSED + limit, 1);
    this.retryAfter = retryAfter;
    this.refusedBy = LIMIT_NAMES[limit]!;
    return this.refusedBy;
  }
}
