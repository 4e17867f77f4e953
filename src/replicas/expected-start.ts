// When a cold service is expected to have a replica ready, as every thread reads it without a
// message: the one writer is the control plane (start-estimate.ts in src/control/service/), the
// readers are the data planes (a refusal's Retry-After, a request that will not wait long enough,
// the keep-alive comment) and the control plane's own queue (its 503s).
//
// Two doubles over a SharedArrayBuffer (plain stores, as the slot table's idle clock: one writer,
// and an aligned double is read whole):
//   [0] estimate  the median of the service's recent start durations, in ms; -1 before any start
//                 was measured (nothing below is published then)
//   [1] readyAt   > 0: the service is cold and a start is in progress, expected to end then (the
//                 shared clock's milliseconds, clock.ts); -1: cold with nothing starting, so a
//                 start asked for now would take the estimate; 0: not cold (or no estimate)
import { sharedClock } from './clock.js';

const ESTIMATE = 0;
const READY_AT = 1;

export class ExpectedStart {
  private readonly f64: Float64Array;

  static create(): ExpectedStart {
    const start = new ExpectedStart(new SharedArrayBuffer(16));
    start.f64[ESTIMATE] = -1;
    return start;
  }

  constructor(readonly buffer: SharedArrayBuffer) {
    this.f64 = new Float64Array(buffer);
  }

  /** The median of the recent start durations in ms, or -1 before any was measured. */
  get estimateMs(): number {
    return this.f64[ESTIMATE]!;
  }

  /**
   * The expected time left until a replica is ready, in ms (0 once the start is overdue), for a
   * cold service; -1 when nothing is known (no start measured yet, or the service is not cold).
   */
  leftMs(): number {
    const at = this.f64[READY_AT]!;
    if (at === 0) return -1;
    if (at < 0) return this.f64[ESTIMATE]!;
    const left = at - sharedClock();
    return left > 0 ? left : 0;
  }

  // ── the control plane's side (main thread) ────────────────────────────────────────────────

  /** The estimate (-1: none) and `readyAt` as the file comment says. */
  publish(estimateMs: number, readyAt: number): void {
    this.f64[ESTIMATE] = estimateMs;
    this.f64[READY_AT] = estimateMs < 0 ? 0 : readyAt;
  }
}

/** `ms` as whole seconds for `Retry-After` or a comment: rounded up, at least 1. */
export function wholeSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
