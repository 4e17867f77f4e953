// The tokensPerMinute window of a cell set of the limit table (limit-layout.ts): 60 one-second
// buckets, each (its second since 2020, its settled tokens), read and written with Atomics by
// every thread. `at` is the index of the first bucket in the table's Int32Array.

export const WINDOW_S = 60;
/** A bucket being reset to a new second. */
const RESETTING = -1;
/** How far the threads' clocks may differ, in ms: a past second's sum is not kept before this much of the next. */
const SKEW_MS = 5;

/** Settled tokens of the buckets within the window ending with `second`. */
export function windowSum(a: Int32Array, at: number, second: number): number {
  let sum = 0;
  for (let i = 0; i < WINDOW_S; i++) {
    const b = at + 2 * i;
    const s = Atomics.load(a, b);
    if (s > second - WINDOW_S && s <= second) sum += Atomics.load(a, b + 1);
  }
  return sum;
}

/** What `PastWindows.read` read: the window's settled tokens, and the seconds until its oldest settled bucket leaves it (0: none). */
export const windowRead = { sum: 0, oldestLeavesIn: 0 };

/**
 * A thread's copy of each cell set's past seconds: the buckets of the window before the current
 * second change only when the second turns (a settlement goes to its own second's bucket), so an
 * admission reads the current bucket and this sum instead of all 60 buckets (120 atomic loads).
 * The sum is taken again when the second turns or the cell set changes hands (its generation),
 * and not kept during a second's first SKEW_MS, while a thread whose clock lags a little may still
 * settle into the bucket just past: the window stays exact across threads.
 */
export class PastWindows {
  private readonly second: Int32Array;
  private readonly gen: Int32Array;
  private readonly sum: Float64Array;
  private readonly oldest: Int32Array;

  constructor(cellSets: number) {
    this.second = new Int32Array(cellSets).fill(-1);
    this.gen = new Int32Array(cellSets);
    this.sum = new Float64Array(cellSets);
    this.oldest = new Int32Array(cellSets);
  }

  /** Fills `windowRead` for the window ending with `second` of the cell set `cell` (its buckets at `at`, its generation `gen`); `msInSecond`: how far into that second the clock is. */
  read(a: Int32Array, at: number, cell: number, gen: number, second: number, msInSecond: number): void {
    let pastSum: number;
    let pastOldest: number;
    if (this.second[cell] === second && this.gen[cell] === gen) {
      pastSum = this.sum[cell]!;
      pastOldest = this.oldest[cell]!;
    } else {
      pastSum = 0;
      pastOldest = second;
      for (let i = 0; i < WINDOW_S; i++) {
        const b = at + 2 * i;
        const s = Atomics.load(a, b);
        if (s > second - WINDOW_S && s < second) {
          const tokens = Atomics.load(a, b + 1);
          pastSum += tokens;
          if (tokens > 0 && s < pastOldest) pastOldest = s;
        }
      }
      if (msInSecond >= SKEW_MS) {
        this.second[cell] = second;
        this.gen[cell] = gen;
        this.sum[cell] = pastSum;
        this.oldest[cell] = pastOldest;
      }
    }
    const b = at + 2 * (second % WINDOW_S);
    const current = Atomics.load(a, b) === second ? Atomics.load(a, b + 1) : 0;
    windowRead.sum = pastSum + current;
    windowRead.oldestLeavesIn = pastOldest < second ? pastOldest + WINDOW_S - second : current > 0 ? WINDOW_S : 0;
  }
}

/**
 * Whole seconds until the window, as its buckets leave it, counts below `limit` with the
 * `reserved` tokens as they are now (at least 1; 1 when the reservations alone reach it: they go
 * when their requests end, which nothing here can tell).
 */
export function tokensRetryAfter(a: Int32Array, at: number, second: number, limit: number, reserved: number): number {
  if (reserved >= limit) return 1;
  for (let k = 1; k <= WINDOW_S; k++) {
    if (windowSum(a, at, second + k) + reserved < limit) return k;
  }
  return WINDOW_S;
}

/**
 * The most a bucket counts: a settlement that would take it further leaves it here (an answer may
 * report any usage; a count never wraps). Far above any limit (tokensPerMinute is at most 1e9).
 */
export const BUCKET_MAX = 0x7fffffff;

/** Adds `tokens` to the bucket of `second`, resetting it first if it still holds an older second; the count saturates at BUCKET_MAX. */
export function settle(a: Int32Array, at: number, second: number, tokens: number): void {
  settleBucket(a, at + 2 * (second % WINDOW_S), second, tokens);
}

/** The tokens the bucket at `b` counts for `period` (0 when it holds another). */
export function bucketCount(a: Int32Array, b: number, period: number): number {
  return Atomics.load(a, b) === period ? Atomics.load(a, b + 1) : 0;
}

/**
 * Adds `tokens` to the bucket at `b` (its period, its count) for `period`, resetting it first if it
 * still holds an older period (a second here, a day or a month: calendar-window.ts); the count
 * saturates at BUCKET_MAX.
 */
export function settleBucket(a: Int32Array, b: number, period: number, tokens: number): void {
  const add = Math.min(tokens, BUCKET_MAX);
  for (;;) {
    const s = Atomics.load(a, b);
    if (s === period) {
      let n = Atomics.load(a, b + 1);
      for (;;) {
        const seen = Atomics.compareExchange(a, b + 1, n, Math.min(BUCKET_MAX, n + add));
        if (seen === n) return;
        n = seen;
      }
    }
    if (s === RESETTING) continue; // another thread is starting this period: a store or two
    if (s > period) return; // a thread with a later clock moved on: these tokens are out of its window
    if (Atomics.compareExchange(a, b, s, RESETTING) === s) {
      Atomics.store(a, b + 1, add);
      Atomics.store(a, b, period);
      return;
    }
  }
}
