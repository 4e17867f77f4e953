// The clock a queued request's arrival and deadline are read on: every thread of the process reads
// it alike, so a worker can stamp a request that the control plane then orders and expires.

/** Milliseconds since the epoch, with sub-millisecond precision, the same in every thread. */
export function sharedClock(): number {
  return performance.timeOrigin + performance.now();
}
