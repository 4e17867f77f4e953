// The one timer behind every upstream deadline (docs/architecture.md#fact-8): connect, response head, body
// idle and keep-alive idle. Instead of a timer per request, each live connection counts ticks of a
// single process-wide interval and compares them with its current limit; arming a deadline is an
// integer store. The interval runs only while some connection is live, and never keeps the
// process alive.
import { TICK_MS } from '../tunables.js';

export interface Ticking {
  /** Called once per tick while watched. */
  onTick(): void;
}

const watched = new Set<Ticking>();
let interval: NodeJS.Timeout | undefined;

function sweep(): void {
  for (const t of watched) t.onTick();
}

export function watch(t: Ticking): void {
  watched.add(t);
  if (interval === undefined) {
    interval = setInterval(sweep, TICK_MS);
    interval.unref();
  }
}

export function unwatch(t: Ticking): void {
  watched.delete(t);
  if (watched.size === 0 && interval !== undefined) {
    clearInterval(interval);
    interval = undefined;
  }
}

/**
 * The number of ticks after which a deadline of `ms` has certainly passed: the first tick after
 * arming may come at once, so one more than `ms / TICK_MS`. 0 means no deadline.
 */
export function ticksFor(ms: number): number {
  return ms <= 0 ? 0 : Math.ceil(ms / TICK_MS) + 1;
}
