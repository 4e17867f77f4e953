// The shared replica table of one service, its memory and the control plane's side (main thread):
// what the state machine, the load reader and the ejections write into it, off the request path.
// The data planes' side — the choice, taking and giving back room, the counts a request adds to —
// is slots.ts's `SlotTable`, a sibling view over the same memory (slot-memory.ts); the cells:
// slot-layout.ts.
//
// - A slot's life: `claim` (a free slot for a new replica, its generation bumped, its prefix index
//   cleared), `setState` on
//   every transition (READY restarts its idle clock), `retireIfIdle` (the idle stop, racing a
//   taker: see slots.ts), EMPTY once the replica is forgotten.
// - A dead thread's holds and overdue counts are given back (`reclaim`).
// - Load readings (`replicas.load`, src/control/service/load-reader.ts): `publishReading` writes
//   a valid one (`waiting` last), `clearReading` makes the replica weighed by its requests in
//   flight again.
// - Failure counts (src/control/service/ejections.ts): read, and set on ejection and probation.
import { ACCEPTING, BUSY, EJECTED, EMPTY, FAILS, FALLBACK, FULL, GEN, HEADER, IDLE_WATCHED, INFLIGHT, KEY_MAX, OVERDUE, READY, STRIDE, TAKEN, TAKEN_AT, WAITING } from './slot-layout.js';
import { newSlotMemory, SlotMemory } from './slot-memory.js';

/** The control plane's view of a service's slot table. */
export class SlotControl extends SlotMemory {
  static create(slots: number, threads: number, concurrency: number, scored = false, prefixSize = 0): SlotControl {
    return new SlotControl(newSlotMemory(slots, threads, concurrency, scored, prefixSize));
  }

  // ── a slot's life ───────────────────────────────────────────────────────────────────────────

  setAccepting(on: boolean): void {
    Atomics.store(this.i32, ACCEPTING, on ? 1 : 0);
  }

  /** Whether releases that leave a replica idle are reported (the pool's waiting start: see IDLE_WATCHED). */
  watchIdle(on: boolean): void {
    Atomics.store(this.i32, IDLE_WATCHED, on ? 1 : 0);
  }

  setFallback(slot: number): void {
    Atomics.store(this.i32, FALLBACK, slot);
  }

  /**
   * A free slot for a new replica (EMPTY, and nothing in flight on its last replica), its
   * generation bumped and its load reading cleared; -1 when every slot is taken.
   */
  claim(): number {
    const a = this.i32;
    for (let s = 0; s < this.slots; s++) {
      const base = HEADER + STRIDE * s;
      if (a[base] !== EMPTY || Atomics.load(a, base + INFLIGHT) !== 0) continue;
      Atomics.store(a, base, BUSY);
      Atomics.add(a, base + GEN, 1);
      Atomics.store(a, base + FAILS, 0);
      this.clearReading(s);
      // The last replica's prompt blocks are not this one's.
      this.prefix?.clear(s);
      this.idleAt[s] = Date.now();
      Atomics.store(this.keepUntil, s, 0n);
      return s;
    }
    return -1;
  }

  setState(slot: number, state: number): void {
    if (state === READY) this.idleAt[slot] = Date.now();
    Atomics.store(this.i32, HEADER + STRIDE * slot, state);
  }

  /**
   * Takes a READY replica out of rotation only if nothing is in flight on it (the idle stop):
   * true when it is out; false (and still READY) when a request got there first.
   */
  retireIfIdle(slot: number): boolean {
    const base = HEADER + STRIDE * slot;
    // An ejected replica takes no request: it may be retired as well.
    let was = Atomics.compareExchange(this.i32, base, READY, BUSY);
    if (was === EJECTED) was = Atomics.compareExchange(this.i32, base, EJECTED, BUSY);
    if (was !== READY && was !== EJECTED) return false;
    if (Atomics.load(this.i32, base + INFLIGHT) === 0) return true;
    Atomics.store(this.i32, base, was);
    return false;
  }

  /** Every request thread `thread` held, given back (it died): the number given back. */
  reclaim(thread: number): number {
    let total = 0;
    for (let s = 0; s < this.slots; s++) {
      const at = this.holdsBase + thread * this.slots + s;
      const held = Atomics.exchange(this.i32, at, 0);
      if (held === 0) continue;
      total += held;
      if (Atomics.sub(this.i32, HEADER + STRIDE * s + INFLIGHT, held) === held) this.idleAt[s] = Date.now();
    }
    for (let s = 0; s < this.slots; s++) {
      const overdue = Atomics.exchange(this.i32, this.overdueBase + thread * this.slots + s, 0);
      if (overdue !== 0) Atomics.sub(this.i32, HEADER + STRIDE * s + OVERDUE, overdue);
    }
    return total;
  }

  gen(slot: number): number {
    return this.i32[HEADER + STRIDE * slot + GEN]!;
  }

  /** `Date.now()` when the slot's inflight last dropped to 0 (or it was set ready). */
  idleSince(slot: number): number {
    return this.idleAt[slot]!;
  }

  /** `Date.now()` before which a caller's `X-Sluice-Keep-Alive` keeps the replica from its idle stop (0: none asked). */
  keptUntil(slot: number): number {
    return Number(Atomics.load(this.keepUntil, slot));
  }

  // ── load readings (the control plane's load reader) ───────────────────────────────────────

  /** Requests handed out on `slot` so far (wrapping): a reading notes it when it begins. */
  taken(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot + TAKEN);
  }

  /**
   * A valid reading of the replica in `slot`: its queue, whether its cache is full, and `taken`
   * when the reading began (requests sent after that count on top of `waiting`).
   */
  publishReading(slot: number, waiting: number, full: boolean, takenAtStart: number): void {
    const base = HEADER + STRIDE * slot;
    Atomics.store(this.i32, base + TAKEN_AT, takenAtStart);
    Atomics.store(this.i32, base + FULL, full ? 1 : 0);
    Atomics.store(this.i32, base + WAITING, Math.max(0, Math.min(KEY_MAX, Math.round(waiting))));
  }

  /** No valid reading (stale, failed, or none yet): the replica is weighed by in flight. */
  clearReading(slot: number): void {
    const base = HEADER + STRIDE * slot;
    Atomics.store(this.i32, base + WAITING, -1);
    Atomics.store(this.i32, base + FULL, 0);
  }

  /** Requests overdue for their status line on `slot`, by every thread. */
  overdue(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot + OVERDUE);
  }

  /** The `waiting` published for `slot`, or -1. */
  waiting(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot + WAITING);
  }

  // ── failure counts (the control plane's ejections) ────────────────────────────────────────

  /** The replica's consecutive failures before a status line. */
  failures(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot + FAILS);
  }

  /** Sets them: 0 when it is ejected, one short of ejection when it returns on probation. */
  setFailures(slot: number, n: number): void {
    Atomics.store(this.i32, HEADER + STRIDE * slot + FAILS, n);
  }
}
