// The tokensPerMinute window of a cell set of the limit table (limit-table.ts): 60 one-second
// buckets, each (its second since 2020, its settled tokens), read and written with Atomics by
// every thread. `at` is the index of the first bucket in the table's Int32Array.

export const WINDOW_S = 60;
/** A bucket being reset to a new second. */
const RESETTING = -1;

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

/** Seconds until the oldest settled bucket leaves the window (0: none). */
export function oldestLeavesIn(a: Int32Array, at: number, second: number): number {
  let oldest = second + 1;
  for (let i = 0; i < WINDOW_S; i++) {
    const b = at + 2 * i;
    const s = Atomics.load(a, b);
    if (s > second - WINDOW_S && s < oldest && Atomics.load(a, b + 1) > 0) oldest = s;
  }
  return oldest > second ? 0 : oldest + WINDOW_S - second;
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

/** Adds `tokens` to the bucket of `second`, resetting it first if it still holds an older second. */
export function settle(a: Int32Array, at: number, second: number, tokens: number): void {
  const b = at + 2 * (second % WINDOW_S);
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
