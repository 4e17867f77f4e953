// Repeated authentication failures from one address (contract section 5, 429 too_many_requests).
// An address that fails FAILURE_LIMIT times within WINDOW_MS is refused for the rest of the window,
// whatever it presents. The table is bounded; on the hot path (no recent failures) it costs one
// size check.

const WINDOW_MS = 60_000;
const FAILURE_LIMIT = 20;
const MAX_ADDRESSES = 10_000;

interface Entry {
  failures: number;
  windowEnds: number;
}

export class AuthFailureLimiter {
  private readonly entries = new Map<string, Entry>();

  /** True when no address has failed recently: the caller need not look up its address. */
  get idle(): boolean {
    return this.entries.size === 0;
  }

  /** Seconds until the address may try again, or 0 if it is not blocked. */
  blockedFor(address: string, now: number): number {
    const entry = this.entries.get(address);
    if (entry === undefined) return 0;
    if (now >= entry.windowEnds) {
      this.entries.delete(address);
      return 0;
    }
    return entry.failures >= FAILURE_LIMIT ? Math.ceil((entry.windowEnds - now) / 1000) : 0;
  }

  recordFailure(address: string, now: number): void {
    const entry = this.entries.get(address);
    if (entry !== undefined && now < entry.windowEnds) {
      entry.failures += 1;
      return;
    }
    if (this.entries.size >= MAX_ADDRESSES) this.sweep(now);
    // Still full of live windows: forget the oldest address rather than grow without bound.
    if (this.entries.size >= MAX_ADDRESSES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(address, { failures: 1, windowEnds: now + WINDOW_MS });
  }

  private sweep(now: number): void {
    for (const [address, entry] of this.entries) if (now >= entry.windowEnds) this.entries.delete(address);
  }
}
