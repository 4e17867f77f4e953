// The control plane's side of the limit table's shared-store fields (limit-table.ts,
// docs/architecture.md#the-shared-store): what the store granted this gateway (leased requests,
// slots of `concurrent`, tokens counted elsewhere) written in, what the gateway used read out, and
// the doorbell that the data plane rings when a token's lease runs low.
import { LOCAL, STORE_DOWN, STORE_FIELDS as F, STORE_UP } from './limit-table.js';
import { WINDOW_S } from './token-window.js';

export class StoreCells {
  private readonly a: Int32Array;
  private readonly base: number;

  constructor(buffer: SharedArrayBuffer) {
    this.a = new Int32Array(buffer);
    this.base = new Float64Array(buffer, 0, 1)[0]!;
  }

  /** Whether requests decide with the store's grants (true) or follow `onStoreDown` (false). */
  setUp(up: boolean): void {
    if (Atomics.load(this.a, F.STORE) === LOCAL) return;
    Atomics.store(this.a, F.STORE, up ? STORE_UP : STORE_DOWN);
  }

  /** The doorbell's count now. */
  bell(): number {
    return Atomics.load(this.a, F.DOORBELL);
  }

  /** Resolves when the doorbell's count is no longer `seen` (a thread rang: a token needs a top-up). */
  ring(seen: number): Promise<unknown> {
    const r = Atomics.waitAsync(this.a, F.DOORBELL, seen);
    return r.async ? r.value : Promise.resolve();
  }

  /** Rings the doorbell from here: the wait of `ring` ends. */
  knock(): void {
    Atomics.add(this.a, F.DOORBELL, 1);
    Atomics.notify(this.a, F.DOORBELL);
  }

  private at(cell: number): number {
    return F.HEADER + cell * F.STRIDE;
  }

  /** The requests that asked for a top-up of `cell` since the last call (cleared). */
  takeNeed(cell: number): number {
    return Math.max(0, Atomics.exchange(this.a, this.at(cell) + F.NEED, 0));
  }

  /** Whether the store has no place of `concurrent` for this gateway beyond its slots (requests short of one are refused at once). */
  setFull(cell: number, full: boolean): void {
    Atomics.store(this.a, this.at(cell) + F.FULL, full ? 1 : 0);
  }

  lease(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + F.LEASE);
  }

  /** Takes the unused lease of `cell` back (to give it back to the store). */
  takeLease(cell: number): number {
    return Math.max(0, Atomics.exchange(this.a, this.at(cell) + F.LEASE, 0));
  }

  addLease(cell: number, requests: number): void {
    if (requests > 0) Atomics.add(this.a, this.at(cell) + F.LEASE, requests);
  }

  /** The store grants `cell` no request for `ms` (its Retry-After); 0: it would grant one now. */
  setExhausted(cell: number, ms: number): void {
    // 0 is "none": a time that happens to be 0 becomes 1.
    const until = ms <= 0 ? 0 : ((performance.timeOrigin + performance.now() - this.base + ms) * F.TICKS_PER_MS) | 0 || 1;
    Atomics.store(this.a, this.at(cell) + F.EXHAUSTED, until);
  }

  /** Clears the store's "no request until" of `cell` once it is past (so that it never lingers until the ticks wrap). */
  clearPastExhausted(cell: number): void {
    const at = this.at(cell) + F.EXHAUSTED;
    const until = Atomics.load(this.a, at);
    if (until === 0) return;
    const now = ((performance.timeOrigin + performance.now() - this.base) * F.TICKS_PER_MS) | 0;
    if (((until - now) | 0) <= 0) Atomics.compareExchange(this.a, at, until, 0);
  }

  slots(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + F.SLOTS);
  }

  /** Sets the slots of `concurrent` this gateway has, then reads its requests in flight (in this order: limit-table.ts). */
  setSlots(cell: number, slots: number): number {
    Atomics.store(this.a, this.at(cell) + F.SLOTS, slots);
    return Atomics.load(this.a, this.at(cell) + F.INFLIGHT);
  }

  inflight(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + F.INFLIGHT);
  }

  reserved(cell: number): number {
    return Atomics.load(this.a, this.at(cell) + F.RESERVED);
  }

  /** Tokens of the window that other gateways counted (settled and reserved). */
  setRemote(cell: number, tokens: number): void {
    Atomics.store(this.a, this.at(cell) + F.REMOTE, Math.max(0, tokens));
  }

  /** The settled tokens of `cell`'s window by Unix second (for what is not yet in the store). */
  settled(cell: number): Map<number, number> {
    const out = new Map<number, number>();
    const second = Math.floor((performance.timeOrigin + performance.now()) / 1000) - F.EPOCH_S;
    const at = this.at(cell) + F.BUCKETS;
    for (let i = 0; i < WINDOW_S; i++) {
      const s = Atomics.load(this.a, at + 2 * i);
      const n = Atomics.load(this.a, at + 2 * i + 1);
      if (s > second - WINDOW_S && s <= second && n > 0) out.set(s + F.EPOCH_S, n);
    }
    return out;
  }

  /** A top-up of `cell` is in (or the store failed): its waiting requests decide again. */
  wake(cell: number): void {
    Atomics.add(this.a, this.at(cell) + F.SEQ, 1);
    Atomics.notify(this.a, this.at(cell) + F.SEQ);
  }
}
