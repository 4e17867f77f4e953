// The shared replica table of one service: what every thread reads to choose a replica, with no
// message between threads (fact 14).
//
// The table's memory, cell by cell: slot-layout.ts. What the control plane writes into it (a slot's
// life, load readings, failure counts): slot-control.ts, a sibling view of the same memory
// (slot-memory.ts), so no worker can call its writers. An EJECTED
// replica (ejections.ts) is not READY: no choice below sees it.
//
// Choosing (`take`): among the ready replicas this thread knows, with room under `concurrency`,
// the one with the lowest key: requests in flight; or, when the service reads loads
// (`replicas.load`), first whether its cache is full (such a replica is chosen only when every
// other is too), then its score (`waiting` plus what this gateway sent it since the reading and
// its requests overdue for a status line, together at most its in flight; in flight for a
// replica without a valid reading), then in flight. Equal keys rotate: the scan starts where
// this thread's last choice left off, so equal replicas share light traffic. The load fields are written by the control plane (load-reader.ts), which also
// decides staleness: a thread reads no clock per request.
//
// Taking: a compare-exchange of the chosen replica's inflight (or an add, when unlimited), plus
// `taken` when loads are read. The control plane moves a replica out of READY with a store, then
// re-reads inflight; a taker re-reads the state after its increment. With sequentially consistent
// atomics one of the two sees the other, so a replica being stopped for idleness never gets a
// request it would drop.
//
// Session affinity (`takeNear`): the ring of affinity-ring.ts walked from the session's point,
// taking the first ready replica with room whose load (the score, or in flight) is below
// ceil(affinityMaxLoad × (total load + 1) / ready replicas): consistent hashing with bounded
// loads. When none is (every one full, or at `concurrency`), the plain choice above.
//
// Prefix-aware routing (`takePrefix`, with the service's index: prefix-index.ts): among the ready
// replicas with room, not cache-full (unless every one is) and below the same bound, the one that
// was sent the longest run of the request's leading prompt blocks; equal runs go to the lower key
// (as `take`). With no run at all, or none within the bound, the plain choice. The room is taken
// at once, so a burst sharing a prefix sees its own earlier requests in the load and spreads once
// the replica reaches the bound; the taker then records the blocks (replica-view.ts).
import type { AffinityRing } from './affinity-ring.js';
import { StateIds } from './state-ids.js';
import { newSlotMemory, SlotMemory, type SlotTableInit } from './slot-memory.js';
import { BUSY, EJECTED, EMPTY, FAILS, FALLBACK, FULL, GEN, HEADER, INFLIGHT, KEY_MAX, KEY_SCALE, OUT, OVERDUE, READY, STRIDE, TAKEN, TAKEN_AT, WAITING } from './slot-layout.js';

export { BUSY, EJECTED, EMPTY, OUT, READY };

/** The data planes' view of a service's slot table (the control plane's: slot-control.ts, a sibling over the same memory). */
export class SlotTable extends SlotMemory {
  /** This thread's next scan start: equal candidates are taken in turn. */
  private cursor = 0;
  /** The slots a ring walk has looked at (`seen[s] === stamp`), so each is weighed once. */
  private readonly seen: Int32Array;
  private stamp = 0;
  /** The replicas that hold stored state, by its id (state-ids.ts). */
  readonly ids: StateIds;
  /** What `weigh` found: ready replicas this thread knows, whether one is not cache-full. */
  private ready = 0;
  private anyNotFull = false;

  static create(slots: number, threads: number, concurrency: number, scored = false): SlotTable {
    return new SlotTable(newSlotMemory(slots, threads, concurrency, scored));
  }

  constructor(init: SlotTableInit) {
    super(init);
    this.seen = new Int32Array(init.slots);
    this.ids = new StateIds(init.ids);
  }

  // ── the hot path (any thread) ──────────────────────────────────────────────────────────────

  /**
   * Takes room on the ready replica with the lowest key (see the file comment; equal keys in
   * turn), for thread `thread`, and returns its slot; -1 when none has room. `known[s]` is the
   * generation of the replica this thread knows in slot s (-1: none); `exclude` is a slot to skip
   * (-1: none). With `fallback`, a static set with nothing ready tries the slot the control plane
   * named.
   */
  take(thread: number, known: Int32Array, exclude: number, fallback: boolean): number {
    const a = this.i32;
    const limit = this.concurrency;
    const slots = this.slots;
    for (let attempt = 0; attempt < 64; attempt++) {
      let best = -1;
      let bestKey = Infinity;
      let bestInflight = 0;
      for (let i = 0, s = this.cursor; i < slots; i++, s = s + 1 === slots ? 0 : s + 1) {
        const base = HEADER + STRIDE * s;
        if (a[base] !== READY || s === exclude || known[s] !== a[base + GEN]) continue;
        const n = a[base + INFLIGHT]!;
        if (limit !== 0 && n >= limit) continue;
        const key = this.scored ? this.key(base, n) : n;
        if (key < bestKey) {
          best = s;
          bestKey = key;
          bestInflight = n;
        }
      }
      if (best < 0) {
        if (!fallback || exclude >= 0) return -1;
        const s = a[FALLBACK]!;
        if (s < 0 || known[s] !== a[HEADER + STRIDE * s + GEN] || a[HEADER + STRIDE * s] !== OUT) return -1;
        best = s;
        bestInflight = a[HEADER + STRIDE * s + INFLIGHT]!;
        if (limit !== 0 && bestInflight >= limit) return -1;
      }
      if (!this.claimOn(thread, best, bestInflight)) continue; // raced, or moved out of rotation: look again
      this.cursor = best + 1 === slots ? 0 : best + 1;
      return best;
    }
    return -1;
  }

  /**
   * Takes room on the replica in `slot` when it is the one of generation `gen`, ready, known to
   * this thread and has room (a request for the state it holds: state-ids.ts); -1 otherwise.
   */
  takeSlot(thread: number, known: Int32Array, slot: number, gen: number): number {
    const a = this.i32;
    if (slot < 0 || slot >= this.slots) return -1;
    const base = HEADER + STRIDE * slot;
    for (let attempt = 0; attempt < 64; attempt++) {
      if (a[base] !== READY || known[slot] !== gen || a[base + GEN] !== gen) return -1;
      const n = a[base + INFLIGHT]!;
      if (this.concurrency !== 0 && n >= this.concurrency) return -1;
      if (this.claimOn(thread, slot, n)) return slot;
    }
    return -1;
  }

  /**
   * `take` for a request with an affinity hash: the first replica on `ring` from `hash` that is
   * ready, has room, is not cache-full (unless every ready replica is) and whose load is below the
   * bound (see the file comment); failing that, `take`'s choice.
   */
  takeNear(thread: number, known: Int32Array, ring: AffinityRing, hash: number, maxLoad: number, fallback: boolean): number {
    const a = this.i32;
    const limit = this.concurrency;
    const owners = ring.owners;
    const points = owners.length;
    attempts: for (let attempt = 0; attempt < 64 && points > 0; attempt++) {
      const bound = this.weigh(known, maxLoad);
      if (bound < 0) break;
      const ready = this.ready;
      const anyNotFull = this.anyNotFull;
      let stamp = (this.stamp = (this.stamp + 1) | 0);
      if (stamp === 0) {
        this.seen.fill(0);
        stamp = this.stamp = 1;
      }
      let weighed = 0;
      for (let i = ring.first(hash), step = 0; step < points && weighed < ready; step++, i = i + 1 === points ? 0 : i + 1) {
        const s = owners[i]!;
        if (this.seen[s] === stamp) continue;
        this.seen[s] = stamp;
        const base = HEADER + STRIDE * s;
        if (a[base] !== READY || known[s] !== a[base + GEN]) continue;
        weighed++;
        const n = a[base + INFLIGHT]!;
        if (limit !== 0 && n >= limit) continue;
        if (anyNotFull && a[base + FULL] !== 0) continue;
        if (this.load(base, n) >= bound) continue;
        if (this.claimOn(thread, s, n)) return s;
        continue attempts; // raced: weigh again
      }
      break;
    }
    return this.take(thread, known, -1, fallback);
  }

  /**
   * `take` for a request with prompt blocks (`hashes`) and the service's prefix index: the replica
   * with the longest run of them among those with room, not cache-full (unless every ready replica
   * is) and below the bound (see the file comment); failing that, `take`'s choice.
   */
  takePrefix(thread: number, known: Int32Array, hashes: Int32Array, maxLoad: number, fallback: boolean): number {
    const a = this.i32;
    const limit = this.concurrency;
    const index = this.prefix!;
    const slots = this.slots;
    for (let attempt = 0; attempt < 64; attempt++) {
      const bound = this.weigh(known, maxLoad);
      if (bound < 0) break;
      let best = -1;
      let bestRun = 0;
      let bestKey = Infinity;
      let bestInflight = 0;
      for (let i = 0, s = this.cursor; i < slots; i++, s = s + 1 === slots ? 0 : s + 1) {
        const base = HEADER + STRIDE * s;
        if (a[base] !== READY || known[s] !== a[base + GEN]) continue;
        const n = a[base + INFLIGHT]!;
        if (limit !== 0 && n >= limit) continue;
        if (this.anyNotFull && a[base + FULL] !== 0) continue;
        if (this.load(base, n) >= bound) continue;
        const run = index.run(s, hashes);
        if (run < bestRun || run === 0) continue;
        const key = this.scored ? this.key(base, n) : n;
        if (run > bestRun || key < bestKey) {
          best = s;
          bestRun = run;
          bestKey = key;
          bestInflight = n;
        }
      }
      if (best < 0) break;
      if (!this.claimOn(thread, best, bestInflight)) continue; // raced: weigh again
      this.cursor = best + 1 === slots ? 0 : best + 1;
      return best;
    }
    return this.take(thread, known, -1, fallback);
  }

  /**
   * The bound of consistent hashing with bounded loads over the ready replicas this thread knows:
   * ceil(maxLoad × (total load + 1) / ready replicas); -1 when none is ready. Sets `ready` and
   * `anyNotFull`.
   */
  private weigh(known: Int32Array, maxLoad: number): number {
    const a = this.i32;
    let total = 0;
    let ready = 0;
    let anyNotFull = false;
    for (let s = 0, base = HEADER; s < this.slots; s++, base += STRIDE) {
      if (a[base] !== READY || known[s] !== a[base + GEN]) continue;
      ready++;
      total += this.load(base, a[base + INFLIGHT]!);
      if (a[base + FULL] === 0) anyNotFull = true;
    }
    this.ready = ready;
    this.anyNotFull = anyNotFull;
    return ready === 0 ? -1 : Math.ceil((maxLoad * (total + 1)) / ready);
  }

  /**
   * A replica's load as the bound of `takeNear` weighs it: its score when it has a valid reading,
   * else its requests in flight.
   */
  private load(base: number, inflight: number): number {
    const a = this.i32;
    const waiting = a[base + WAITING]!;
    if (waiting < 0) return inflight;
    let sent = (a[base + TAKEN]! - a[base + TAKEN_AT]!) | 0;
    if (sent < 0) sent = 0;
    // Requests overdue for a status line: a reading that says the replica is idle while it
    // answers nothing is not believed (docs/architecture.md#replicas-that-fail-quietly).
    sent += a[base + OVERDUE]!;
    return waiting + (sent > inflight ? inflight : sent);
  }

  /** `take`'s comparison key when loads are read: cache-full, then the score, then in flight. */
  private key(base: number, inflight: number): number {
    const score = Math.min(this.load(base, inflight), KEY_MAX);
    return (this.i32[base + FULL]! * KEY_SCALE + score) * KEY_SCALE + Math.min(inflight, KEY_MAX);
  }

  /** Takes one request of room on `slot`, seen with `inflight` requests; false if it raced or left rotation. */
  private claimOn(thread: number, slot: number, inflight: number): boolean {
    const a = this.i32;
    const base = HEADER + STRIDE * slot;
    if (this.concurrency === 0) Atomics.add(a, base + INFLIGHT, 1);
    else if (Atomics.compareExchange(a, base + INFLIGHT, inflight, inflight + 1) !== inflight) return false;
    const state = Atomics.load(a, base);
    if (state !== READY && state !== OUT) {
      // Moved out of rotation between the read and the increment: give it back.
      this.giveBack(slot);
      return false;
    }
    Atomics.add(a, this.holdsBase + thread * this.slots + slot, 1);
    if (this.scored) Atomics.add(a, base + TAKEN, 1);
    return true;
  }

  /**
   * Gives back one request of thread `thread` on `slot`; true when the replica is idle now.
   */
  release(thread: number, slot: number): boolean {
    Atomics.sub(this.i32, this.holdsBase + thread * this.slots + slot, 1);
    return this.giveBack(slot);
  }

  /**
   * A request on `slot` asked to keep its replica loaded (`X-Sluice-Keep-Alive`): no idle stop
   * before `until` (`Date.now()` ms). Raised only, with a compare-exchange: of two threads, the later time wins.
   */
  keepLoaded(slot: number, until: number): void {
    const want = BigInt(Math.ceil(until));
    const cells = this.keepUntil;
    for (let was = Atomics.load(cells, slot); was < want; ) {
      const seen = Atomics.compareExchange(cells, slot, was, want);
      if (seen === was) return;
      was = seen;
    }
  }

  /** The replica sent a status line: its consecutive failures end (one read when there were none). */
  answered(slot: number): void {
    const at = HEADER + STRIDE * slot + FAILS;
    if (this.i32[at] !== 0) Atomics.store(this.i32, at, 0);
  }

  /** The replica failed a request before its status line: its consecutive failures, this one counted. */
  failed(slot: number): number {
    return Atomics.add(this.i32, HEADER + STRIDE * slot + FAILS, 1) + 1;
  }

  /** Thread `thread` has `delta` more requests on `slot` overdue for their status line. */
  addOverdue(thread: number, slot: number, delta: number): void {
    Atomics.add(this.i32, this.overdueBase + thread * this.slots + slot, delta);
    Atomics.add(this.i32, HEADER + STRIDE * slot + OVERDUE, delta);
  }

  private giveBack(slot: number): boolean {
    const before = Atomics.sub(this.i32, HEADER + STRIDE * slot + INFLIGHT, 1);
    if (before !== 1) return false;
    this.idleAt[slot] = Date.now();
    return true;
  }
}
