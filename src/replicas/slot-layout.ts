// The layout of a service's shared replica table (slots.ts, slot-control.ts): what each cell of its
// memory holds.
//
// One Int32Array over a SharedArrayBuffer, written with `Atomics` where two threads may race:
//
//   [0] accepting      1 while the service takes requests, 0 once the gateway drains
//   [1] queued         requests in the control plane's queue, plus enqueue messages on their way
//                      there; while > 0 a new request queues too (the queue's order rules)
//   [2] fallback       static sets with nothing in rotation: the slot to try anyway, or -1
//   [3] idleWatched    1 while a start of another service waits on this service's pool
//                      (docs/configuration.md#pools): a release that leaves a replica with nothing
//                      in flight tells the control plane, which may stop it for that start
//   then per slot s (a replica's place in the table; reused once the replica is gone and idle):
//   [H + 9s + 0] state     EMPTY | READY | OUT (unreachable) | BUSY (starting, draining, failed)
//                          | EJECTED (ready, but out of rotation for a backoff: ejections.ts)
//   [H + 9s + 1] inflight  requests handed out on the replica, by every thread together
//   [H + 9s + 2] gen       bumped each time the slot gets a new replica, so a thread that has not
//                          heard of the new replica yet (its message is on the way) skips it
//   [H + 9s + 3] waiting   the model server's own queue at its last valid load reading, or -1
//                          (no reading, or a stale or failed one: in flight counts instead)
//   [H + 9s + 4] taken     requests handed out on the replica so far (a wrapping counter; kept
//                          only when the service reads loads)
//   [H + 9s + 5] takenAt   `taken` when the last valid reading began: `taken - takenAt` is what
//                          this gateway sent the replica since then
//   [H + 9s + 6] full      1 when that reading's cache usage was at or above `cacheUsageHigh`
//   [H + 9s + 7] overdue   this gateway's requests on the replica waiting for their status line
//                          longer than a reading interval, by every thread together (counted by
//                          the upstream connections on their ticks, only when loads are read)
//   [H + 9s + 8] fails     the replica's consecutive failures (refused, reset or timed out before
//                          a status line), by every thread; an answer resets it
//   then per thread w and slot s: [H + 9S + wS + s] the requests thread w holds on slot s, so the
//   control plane can give back what a dead worker held; then [H + 10S + wS + s] the overdue
//   requests thread w counts on slot s (given back too).
//
// One Float64Array beside it holds, per slot, `Date.now()` when its inflight last dropped to 0:
// the idle clock of launched replicas; after it in the same buffer a BigInt64Array holds, per slot,
// the `Date.now()` before which a request's `X-Sluice-Keep-Alive` keeps the replica from its idle
// stop (0: none; raised with a compare-exchange, so the latest wins whichever thread writes). A third buffer holds when a cold start is expected to end
// (expected-start.ts).

export const EMPTY = 0;
export const READY = 1;
export const OUT = 2;
export const BUSY = 3;
export const EJECTED = 4;

export const ACCEPTING = 0;
export const QUEUED = 1;
export const FALLBACK = 2;
export const IDLE_WATCHED = 3;
export const HEADER = 4;

// Offsets in a slot; the state is at 0.
export const INFLIGHT = 1;
export const GEN = 2;
export const WAITING = 3;
export const TAKEN = 4;
export const TAKEN_AT = 5;
export const FULL = 6;
export const OVERDUE = 7;
export const FAILS = 8;
export const STRIDE = 9;

/** Scores and in-flight counts above this compare as equal (the key packs three numbers in one double). */
export const KEY_MAX = 2 ** 21 - 1;
export const KEY_SCALE = 2 ** 21;
