// Exponential backoff, one rule for every retry loop of the gateway: starting a replica again
// (control/service/tuning.ts), ejecting one again (control/service/ejections.ts), replacing a
// worker that keeps dying (gateway/worker-pool.ts) and calling the Kubernetes API again
// (control/kinds/kubernetes/api-trouble.ts, which adds its own jitter).

/** Doublings beyond this add nothing: every cap is reached long before (2^30 × 1 ms ≈ 12 days). */
const MAX_DOUBLINGS = 30;

/**
 * The wait before the next try after `failures` consecutive failures (1 or more): `baseMs`,
 * doubling per failure, never above `maxMs`. The exponent is capped, so a long run of failures
 * stays finite (and a `baseMs` of 0 stays 0 instead of 0 × Infinity).
 */
export function backoffMs(baseMs: number, maxMs: number, failures: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(failures - 1, 0), MAX_DOUBLINGS));
}
