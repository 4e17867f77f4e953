// The limit table's memory (docs/architecture.md#the-limit-table; its cells: limit-layout.ts) and
// what every view of it does alike. Three sibling views extend it: the data planes' (limit-table.ts
// `LimitTable`: admitting, reserving, ending a request), the control plane's (limit-control.ts
// `LimitControl`: cell sets cleared, a dead thread's holds given back, idle TATs swept, a token's
// use read) and the shared store's client's (store/store-cells.ts `StoreCells`). None inherits
// another's writers, so a worker calling a control plane writer is a type error, and each reads
// the very same fields with no indirection per request.
import { CELL_SETS, clock, GEN, HEADER, LOCAL, REFUSE_WHEN_DOWN, STORE, STORE_DOWN, STRIDE, THREADS } from './limit-layout.js';

/**
 * A table for `cellSets` limited (service, token) pairs and `threads` data plane threads: once per
 * gateway start, shared by every thread.
 */
export function createLimitBuffer(cellSets: number, threads: number, store?: { refuseWhenDown: boolean }): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(4 * (HEADER + cellSets * STRIDE + threads * cellSets * 2 + threads));
  new Float64Array(buffer, 0, 1)[0] = clock();
  const a = new Int32Array(buffer);
  a[THREADS] = threads;
  a[CELL_SETS] = cellSets;
  // With a store, down until it first answers.
  a[STORE] = store === undefined ? LOCAL : STORE_DOWN;
  a[REFUSE_WHEN_DOWN] = store?.refuseWhenDown === true ? 1 : 0;
  return buffer;
}

/** The limit table's memory and what every view of it does alike. */
export abstract class LimitMemory {
  protected readonly a: Int32Array;
  /** The base time of the ticks (ms). */
  protected readonly base: number;

  constructor(buffer: SharedArrayBuffer) {
    this.a = new Int32Array(buffer);
    this.base = new Float64Array(buffer, 0, 1)[0]!;
  }

  get cellSets(): number {
    return this.a[CELL_SETS]!;
  }

  /** Where the holds of `thread` begin (per cell set: concurrent places, reserved tokens). */
  protected holdsOf(thread: number): number {
    return HEADER + this.a[CELL_SETS]! * STRIDE + thread * this.a[CELL_SETS]! * 2;
  }

  /** Where the reloads applied by each thread are (one word per thread, after the holds). */
  protected get appliedAt(): number {
    return this.holdsOf(this.a[THREADS]!);
  }

  /** Data plane thread `thread` applied the tokens of reload `reload` (1 at start, one more per reload). */
  applied(thread: number, reload: number): void {
    Atomics.store(this.a, this.appliedAt + thread, reload);
  }

  /** The cell set's generation now: bumped by each `clear`. */
  generation(cell: number): number {
    return Atomics.load(this.a, HEADER + cell * STRIDE + GEN);
  }
}
