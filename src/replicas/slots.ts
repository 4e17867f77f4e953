// The shared replica table of one service: what every thread reads to choose a replica, with no
// message between threads (contract section 10, ARCHITECTURE fact 14).
//
// One Int32Array over a SharedArrayBuffer, written with `Atomics` where two threads may race:
//
//   [0] accepting      1 while the service takes requests, 0 once the gateway drains
//   [1] queued         requests in the control plane's queue, plus enqueue messages on their way
//                      there; while > 0 a new request queues too (FIFO across workers)
//   [2] fallback       static sets with nothing in rotation: the slot to try anyway, or -1
//   then per slot s (a replica's place in the table; reused once the replica is gone and idle):
//   [H + 4s + 0] state   EMPTY | READY | OUT (unreachable) | BUSY (starting, draining, failed)
//   [H + 4s + 1] inflight requests handed out on the replica, by every thread together
//   [H + 4s + 2] gen     bumped each time the slot gets a new replica, so a thread that has not
//                        heard of the new replica yet (its message is on the way) skips it
//   then per thread w and slot s: [H + 4S + wS + s] the requests thread w holds on slot s, so the
//   control plane can give back what a dead worker held.
//
// One Float64Array beside it holds, per slot, `Date.now()` when its inflight last dropped to 0:
// the idle clock of launched replicas.
//
// Taking a slot: read the states and inflight counts, choose the least loaded ready replica under
// `concurrency`, and compare-exchange its inflight (or add, when unlimited). The control plane
// moves a replica out of READY with a store, then re-reads inflight; a taker re-reads the state
// after its increment. With sequentially consistent atomics one of the two sees the other, so a
// replica being stopped for idleness never gets a request it would drop.

export const EMPTY = 0;
export const READY = 1;
export const OUT = 2;
export const BUSY = 3;

const ACCEPTING = 0;
const QUEUED = 1;
const FALLBACK = 2;
const HEADER = 4;
const STRIDE = 4;

/** What a thread needs to rebuild the table over the same memory. */
export interface SlotTableInit {
  ints: SharedArrayBuffer;
  idle: SharedArrayBuffer;
  slots: number;
  threads: number;
  /** Requests per replica; 0 = unlimited. */
  concurrency: number;
}

export class SlotTable {
  readonly slots: number;
  readonly threads: number;
  readonly concurrency: number;
  private readonly i32: Int32Array;
  private readonly idleAt: Float64Array;
  private readonly holdsBase: number;

  static create(slots: number, threads: number, concurrency: number): SlotTable {
    const ints = new SharedArrayBuffer(4 * (HEADER + STRIDE * slots + threads * slots));
    const idle = new SharedArrayBuffer(8 * slots);
    const table = new SlotTable({ ints, idle, slots, threads, concurrency });
    table.i32[ACCEPTING] = 1;
    table.i32[FALLBACK] = -1;
    return table;
  }

  constructor(readonly init: SlotTableInit) {
    this.slots = init.slots;
    this.threads = init.threads;
    this.concurrency = init.concurrency;
    this.i32 = new Int32Array(init.ints);
    this.idleAt = new Float64Array(init.idle);
    this.holdsBase = HEADER + STRIDE * init.slots;
  }

  // ── the hot path (any thread) ──────────────────────────────────────────────────────────────

  get accepting(): boolean {
    return this.i32[ACCEPTING] === 1;
  }

  get queued(): number {
    return Atomics.load(this.i32, QUEUED);
  }

  /**
   * Takes room on the ready replica with the fewest requests in flight (ties: the lower slot), for
   * thread `thread`, and returns its slot; -1 when none has room. `known[s]` is the generation
   * of the replica this thread knows in slot s (-1: none); `exclude` is a slot to skip (-1: none).
   * With `fallback`, a static set with nothing ready tries the slot the control plane named.
   */
  take(thread: number, known: Int32Array, exclude: number, fallback: boolean): number {
    const a = this.i32;
    const limit = this.concurrency;
    for (let attempt = 0; attempt < 64; attempt++) {
      let best = -1;
      let least = 0x7fffffff;
      for (let s = 0, base = HEADER; s < this.slots; s++, base += STRIDE) {
        if (a[base] !== READY || s === exclude || known[s] !== a[base + 2]) continue;
        const n = a[base + 1]!;
        if (n < least && (limit === 0 || n < limit)) {
          best = s;
          least = n;
        }
      }
      if (best < 0) {
        if (!fallback || exclude >= 0) return -1;
        const s = a[FALLBACK]!;
        if (s < 0 || known[s] !== a[HEADER + STRIDE * s + 2] || a[HEADER + STRIDE * s] !== OUT) return -1;
        best = s;
        least = a[HEADER + STRIDE * s + 1]!;
        if (limit !== 0 && least >= limit) return -1;
      }
      const base = HEADER + STRIDE * best;
      if (limit === 0) Atomics.add(a, base + 1, 1);
      else if (Atomics.compareExchange(a, base + 1, least, least + 1) !== least) continue; // raced: look again
      const state = Atomics.load(a, base);
      if (state !== READY && state !== OUT) {
        // Moved out of rotation between the read and the increment: give it back, look again.
        this.giveBack(best);
        continue;
      }
      Atomics.add(a, this.holdsBase + thread * this.slots + best, 1);
      return best;
    }
    return -1;
  }

  /**
   * Gives back one request of thread `thread` on `slot`; true when the replica is idle now.
   */
  release(thread: number, slot: number): boolean {
    Atomics.sub(this.i32, this.holdsBase + thread * this.slots + slot, 1);
    return this.giveBack(slot);
  }

  private giveBack(slot: number): boolean {
    const before = Atomics.sub(this.i32, HEADER + STRIDE * slot + 1, 1);
    if (before !== 1) return false;
    this.idleAt[slot] = Date.now();
    return true;
  }

  /** Counts a request on its way to the control plane's queue (before the message is posted). */
  addQueued(n: number): void {
    Atomics.add(this.i32, QUEUED, n);
  }

  gen(slot: number): number {
    return this.i32[HEADER + STRIDE * slot + 2]!;
  }

  inflight(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot + 1);
  }

  state(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot);
  }

  /** `Date.now()` when the slot's inflight last dropped to 0 (or it was set ready). */
  idleSince(slot: number): number {
    return this.idleAt[slot]!;
  }

  // ── the control plane's side (main thread) ─────────────────────────────────────────────────

  setAccepting(on: boolean): void {
    Atomics.store(this.i32, ACCEPTING, on ? 1 : 0);
  }

  setFallback(slot: number): void {
    Atomics.store(this.i32, FALLBACK, slot);
  }

  /**
   * A free slot for a new replica (EMPTY, and nothing in flight on its last replica), its
   * generation bumped; -1 when every slot is taken.
   */
  claim(): number {
    const a = this.i32;
    for (let s = 0; s < this.slots; s++) {
      const base = HEADER + STRIDE * s;
      if (a[base] !== EMPTY || Atomics.load(a, base + 1) !== 0) continue;
      Atomics.store(a, base, BUSY);
      Atomics.add(a, base + 2, 1);
      this.idleAt[s] = Date.now();
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
    if (Atomics.compareExchange(this.i32, base, READY, BUSY) !== READY) return false;
    if (Atomics.load(this.i32, base + 1) === 0) return true;
    Atomics.store(this.i32, base, READY);
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
      if (Atomics.sub(this.i32, HEADER + STRIDE * s + 1, held) === held) this.idleAt[s] = Date.now();
    }
    return total;
  }
}
