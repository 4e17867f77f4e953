// Order statistics over plain arrays of numbers.

/** The p-th percentile (0–100) of `values`, linear between closest ranks; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  max: number;
}

export function summarize(values: readonly number[]): Summary {
  const n = values.length;
  let sum = 0;
  let max = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    sum += v;
    if (v > max) max = v;
  }
  return {
    n,
    p50: percentile(values, 50),
    p90: percentile(values, 90),
    p99: percentile(values, 99),
    mean: n === 0 ? Number.NaN : sum / n,
    max: n === 0 ? Number.NaN : max,
  };
}

/** Nanoseconds (bigint) to microseconds (number). */
export function nsToUs(ns: bigint): number {
  return Number(ns) / 1000;
}
