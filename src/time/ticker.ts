// The one timer of the data plane (docs/architecture.md#fact-8): every upstream deadline (connect,
// response head, body idle and keep-alive idle) and the keep-alive clock of waiting requests.
// Instead of a timer per request, one process-wide interval counts ticks, and the interval runs
// only while something waits for one; it never keeps the process alive.
//
// Two kinds of waiters:
// - `watch`: called at every tick (the keep-alive clock of waiting requests, which has work at
//   every tick while a request waits).
// - `schedule`: a deadline, called once at the tick it names. A connection with a deadline minutes
//   away is not visited at every tick (visiting every live connection ten times a second cost the
//   new-stream benchmark more than relaying its tokens did): the deadlines are buckets by tick,
//   each an intrusive doubly linked list through the waiters themselves (no allocation per
//   schedule, and `cancel` forgets a closed connection at once instead of holding it until its
//   tick). Moving a deadline later is the waiter's own integer store: when the earlier tick comes
//   it finds nothing due yet and schedules itself again.
import { TICK_MS } from '../tunables.js';

export interface Ticking {
  /** Called once per tick while watched. */
  onTick(): void;
}

/** A waiter for one tick (`schedule`): the fields are this module's alone. */
export interface Deadline {
  /** The tick came (the waiter checks what is due: it may have moved its deadline since). */
  onDeadline(): void;
  /** The tick of the bucket it is in, or -1. */
  dueTick: number;
  duePrev: Deadline | undefined;
  dueNext: Deadline | undefined;
}

const watched = new Set<Ticking>();
/** Ticks since the interval first ran (never reset: deadlines are ticks of this count). */
let now = 0;
/** Tick → the first waiter of its bucket. */
const buckets = new Map<number, Deadline>();
/** The waiters of the bucket being run (a deadline may cancel or schedule others). */
const firing: Deadline[] = [];
let interval: NodeJS.Timeout | undefined;

function sweep(): void {
  now += 1;
  for (const t of watched) t.onTick();
  let d = buckets.get(now);
  if (d !== undefined) {
    buckets.delete(now);
    while (d !== undefined) {
      const next: Deadline | undefined = d.dueNext;
      d.dueTick = -1;
      d.duePrev = undefined;
      d.dueNext = undefined;
      firing.push(d);
      d = next;
    }
    for (const f of firing) f.onDeadline();
    firing.length = 0;
  }
  stopIfIdle();
}

function start(): void {
  if (interval === undefined) {
    interval = setInterval(sweep, TICK_MS);
    interval.unref();
  }
}

function stopIfIdle(): void {
  if (watched.size === 0 && buckets.size === 0 && interval !== undefined) {
    clearInterval(interval);
    interval = undefined;
  }
}

export function watch(t: Ticking): void {
  watched.add(t);
  start();
}

export function unwatch(t: Ticking): void {
  watched.delete(t);
  stopIfIdle();
}

/** The current tick: a deadline of `n` ticks from now is `tickNow() + n`. */
export function tickNow(): number {
  return now;
}

/**
 * Calls `d.onDeadline()` at tick `tick` (at the next tick if that has passed). A waiter already
 * due at or before `tick` stays there: it looks again when that tick comes.
 */
export function schedule(d: Deadline, tick: number): void {
  const at = tick > now ? tick : now + 1;
  if (d.dueTick !== -1) {
    if (d.dueTick <= at) return;
    unlink(d);
  }
  const first = buckets.get(at);
  d.dueNext = first;
  d.duePrev = undefined;
  if (first !== undefined) first.duePrev = d;
  buckets.set(at, d);
  d.dueTick = at;
  start();
}

/** Forgets `d`'s tick, if it has one. */
export function cancel(d: Deadline): void {
  if (d.dueTick === -1) return;
  unlink(d);
  stopIfIdle();
}

function unlink(d: Deadline): void {
  const prev = d.duePrev;
  const next = d.dueNext;
  if (prev !== undefined) prev.dueNext = next;
  else if (next !== undefined) buckets.set(d.dueTick, next);
  else buckets.delete(d.dueTick);
  if (next !== undefined) next.duePrev = prev;
  d.dueTick = -1;
  d.duePrev = undefined;
  d.dueNext = undefined;
}

/**
 * The number of ticks after which a deadline of `ms` has certainly passed: the first tick after
 * arming may come at once, so one more than `ms / TICK_MS`. 0 means no deadline.
 */
export function ticksFor(ms: number): number {
  return ms <= 0 ? 0 : Math.ceil(ms / TICK_MS) + 1;
}
