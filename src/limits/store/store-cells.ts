// The control plane's side of the limit table's shared-store fields (limit-layout.ts,
// docs/architecture.md#the-shared-store): what the store granted this gateway (leased requests,
// slots of `concurrent`, tokens counted elsewhere) written in, what the gateway used read out, and
// the doorbell that the data plane rings when a token's lease runs low.
import { BUCKETS, DAY, DOORBELL, EPOCH_S, EXHAUSTED, FULL, HEADER, INFLIGHT, LEASE, LEFT, LOCAL, MONTH, NEED, REMOTE, REMOTE_DAY, REMOTE_MONTH, RESERVED, ROOM, SEQ, SLOTS, STORE, STORE_DOWN, STORE_UP, STRIDE, TICKS_PER_MS } from '../limit-layout.js';
import { LimitMemory } from '../limit-memory.js';
import { BUCKET_MAX, bucketCount, WINDOW_S } from '../token-window.js';

/** The shared store's client's view of the limit table (a sibling of LimitTable and LimitControl: limit-memory.ts). */
export class StoreCells extends LimitMemory {

  /** Whether requests decide with the store's grants (true) or follow `onStoreDown` (false). */
  setUp(up: boolean): void {
    if (Atomics.load(this.a, STORE) === LOCAL) return;
    Atomics.store(this.a, STORE, up ? STORE_UP : STORE_DOWN);
  }

  /** The doorbell's count now. */
  bell(): number {
    return Atomics.load(this.a, DOORBELL);
  }

  /** Resolves when the doorbell's count is no longer `seen` (a thread rang: a token needs a top-up). */
  ring(seen: number): Promise<unknown> {
    const r = Atomics.waitAsync(this.a, DOORBELL, seen);
    return r.async ? r.value : Promise.resolve();
  }

  /** Rings the doorbell from here: the wait of `ring` ends. */
  knock(): void {
    Atomics.add(this.a, DOORBELL, 1);
    Atomics.notify(this.a, DOORBELL);
  }

  private at(cell: number): number {
    return HEADER + cell * STRIDE;
  }

  /** The requests that asked for a top-up of `cell` since the last call (cleared). */
  takeNeed(cell: number): number {
    return Math.max(0, Atomics.exchange(this.a, this.at(cell) + NEED, 0));
  }

  /** Whether the store has no place of `concurrent` for this gateway beyond its slots (requests short of one are refused at once). */
  setFull(cell: number, full: boolean): void {
    Atomics.store(this.a, this.at(cell) + FULL, full ? 1 : 0);
  }

  lease(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + LEASE);
  }

  /** Takes the unused lease of `cell` back (to give it back to the store). */
  takeLease(cell: number): number {
    return Math.max(0, Atomics.exchange(this.a, this.at(cell) + LEASE, 0));
  }

  /**
   * What the store would still grant of `cell`'s requestsPerMinute after its last answer, beyond
   * the leases (the `RateLimit` of an admitted request: its gateway's lease plus this). Set before
   * the lease it came with is added: a request admitted in between counts too few, never too many.
   */
  setLeft(cell: number, requests: number): void {
    Atomics.store(this.a, this.at(cell) + LEFT, Math.max(0, requests));
  }

  /** The places of `concurrent` the other gateways leave `cell` (set before its slots: see `setLeft`). */
  setRoom(cell: number, places: number): void {
    Atomics.store(this.a, this.at(cell) + ROOM, Math.max(0, places));
  }

  addLease(cell: number, requests: number): void {
    if (requests > 0) Atomics.add(this.a, this.at(cell) + LEASE, requests);
  }

  /** The store grants `cell` no request for `ms` (its Retry-After); 0: it would grant one now. */
  setExhausted(cell: number, ms: number): void {
    // 0 is "none": a time that happens to be 0 becomes 1.
    const until = ms <= 0 ? 0 : ((performance.timeOrigin + performance.now() - this.base + ms) * TICKS_PER_MS) | 0 || 1;
    Atomics.store(this.a, this.at(cell) + EXHAUSTED, until);
  }

  /** Clears the store's "no request until" of `cell` once it is past (so that it never lingers until the ticks wrap). */
  clearPastExhausted(cell: number): void {
    const at = this.at(cell) + EXHAUSTED;
    const until = Atomics.load(this.a, at);
    if (until === 0) return;
    const now = ((performance.timeOrigin + performance.now() - this.base) * TICKS_PER_MS) | 0;
    if (((until - now) | 0) <= 0) Atomics.compareExchange(this.a, at, until, 0);
  }

  slots(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + SLOTS);
  }

  /** Sets the slots of `concurrent` this gateway has, then reads its requests in flight (in this order: see `admit` in limit-table.ts). */
  setSlots(cell: number, slots: number): number {
    Atomics.store(this.a, this.at(cell) + SLOTS, slots);
    return Atomics.load(this.a, this.at(cell) + INFLIGHT);
  }

  inflight(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + INFLIGHT);
  }

  reserved(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + RESERVED);
  }

  /** Tokens of the window that other gateways counted (settled and reserved). */
  setRemote(cell: number, tokens: number): void {
    // The store sums every gateway's counts: kept within the cell (BUCKET_MAX, far above any limit).
    Atomics.store(this.a, this.at(cell) + REMOTE, Math.min(BUCKET_MAX, Math.max(0, tokens)));
  }

  /** The settled tokens of `cell`'s window by Unix second (for what is not yet in the store). */
  settled(cell: number): Map<number, number> {
    const out = new Map<number, number>();
    const second = Math.floor((performance.timeOrigin + performance.now()) / 1000) - EPOCH_S;
    const at = this.at(cell) + BUCKETS;
    for (let i = 0; i < WINDOW_S; i++) {
      const s = Atomics.load(this.a, at + 2 * i);
      const n = Atomics.load(this.a, at + 2 * i + 1);
      if (s > second - WINDOW_S && s <= second && n > 0) out.set(s + EPOCH_S, n);
    }
    return out;
  }

  /** The tokens this gateway settled in `cell`'s day `period` (`month`: its month instead). */
  settledIn(cell: number, period: number, month: boolean): number {
    return bucketCount(this.a, this.at(cell) + (month ? MONTH : DAY), period);
  }

  /** The tokens of `cell`'s day `period` (`month`: of its month) that other gateways counted, settled and reserved. */
  setRemoteIn(cell: number, period: number, month: boolean, tokens: number): void {
    const b = this.at(cell) + (month ? REMOTE_MONTH : REMOTE_DAY);
    // No period while the count changes: a request never reads one period's count as another's.
    Atomics.store(this.a, b, -1);
    Atomics.store(this.a, b + 1, Math.min(BUCKET_MAX, Math.max(0, tokens)));
    Atomics.store(this.a, b, period);
  }

  /** A top-up of `cell` is in (or the store failed): its waiting requests decide again. */
  wake(cell: number): void {
    Atomics.add(this.a, this.at(cell) + SEQ, 1);
    Atomics.notify(this.a, this.at(cell) + SEQ);
  }
}
