// The shared replica table's memory (slot-layout.ts: its cells), and what every view of it reads
// alike. Two sibling views extend it: the data planes' (slots.ts `SlotTable`: the choice, taking
// and giving back room) and the control plane's (slot-control.ts `SlotControl`: a slot's life, load
// readings, failure counts). Neither inherits the other's writers, so a worker calling a control
// plane writer is a type error, and both read the very same fields with no indirection per request.
import { ExpectedStart } from './expected-start.js';
import { StateIds } from './state-ids.js';
import { newPrefixIndex, PrefixIndex, type PrefixIndexInit } from './prefix-index.js';
import { ACCEPTING, FALLBACK, HEADER, IDLE_WATCHED, INFLIGHT, QUEUED, READY, STRIDE, WAITING } from './slot-layout.js';

/** What a thread needs to rebuild the table over the same memory. */
export interface SlotTableInit {
  ints: SharedArrayBuffer;
  idle: SharedArrayBuffer;
  /** When a cold start is expected to end (expected-start.ts). */
  start: SharedArrayBuffer;
  /** The ids of stored state and the replicas that hold it (state-ids.ts). */
  ids: SharedArrayBuffer;
  slots: number;
  threads: number;
  /** Requests per replica; 0 = unlimited. */
  concurrency: number;
  /** The service reads its replicas' loads (`replicas.load`): choices use the scores. */
  scored: boolean;
  /** Prefix-aware routing (`routing.prefix`): the replicas' block indexes (prefix-index.ts). */
  prefix?: PrefixIndexInit | undefined;
}

/** New memory for a table of `slots` replicas and `threads` data planes, every cell as a new service starts. */
export function newSlotMemory(slots: number, threads: number, concurrency: number, scored: boolean, prefixSize = 0): SlotTableInit {
  const ints = new SharedArrayBuffer(4 * (HEADER + STRIDE * slots + 2 * threads * slots));
  const idle = new SharedArrayBuffer(16 * slots);
  const i32 = new Int32Array(ints);
  i32[ACCEPTING] = 1;
  i32[FALLBACK] = -1;
  for (let s = 0; s < slots; s++) i32[HEADER + STRIDE * s + WAITING] = -1;
  return { ints, idle, start: ExpectedStart.create().buffer, ids: StateIds.create(), slots, threads, concurrency, scored, prefix: prefixSize > 0 ? newPrefixIndex(slots, prefixSize) : undefined };
}

/** The table's memory and what both planes read of it. */
export abstract class SlotMemory {
  readonly slots: number;
  readonly threads: number;
  readonly concurrency: number;
  readonly scored: boolean;
  /** When a cold start is expected to end: written by the control plane, read by every thread. */
  readonly start: ExpectedStart;
  /** With prefix-aware routing: the replicas' block indexes, beside the table. */
  readonly prefix: PrefixIndex | undefined;
  protected readonly i32: Int32Array;
  protected readonly idleAt: Float64Array;
  /** Per slot, `Date.now()` before which a caller's keep-alive keeps the replica from its idle stop (0n: none). */
  protected readonly keepUntil: BigInt64Array;
  /** Where the holds per thread and slot begin. */
  protected readonly holdsBase: number;
  /** Where the overdue counts per thread and slot begin. */
  protected readonly overdueBase: number;

  constructor(readonly init: SlotTableInit) {
    this.slots = init.slots;
    this.threads = init.threads;
    this.concurrency = init.concurrency;
    this.scored = init.scored;
    this.i32 = new Int32Array(init.ints);
    this.idleAt = new Float64Array(init.idle, 0, init.slots);
    this.keepUntil = new BigInt64Array(init.idle, 8 * init.slots, init.slots);
    this.start = new ExpectedStart(init.start);
    this.prefix = init.prefix === undefined ? undefined : new PrefixIndex(init.prefix);
    this.holdsBase = HEADER + STRIDE * init.slots;
    this.overdueBase = this.holdsBase + init.threads * init.slots;
  }

  // ── read by both planes ─────────────────────────────────────────────────────────────────────

  get accepting(): boolean {
    return this.i32[ACCEPTING] === 1;
  }

  get queued(): number {
    return Atomics.load(this.i32, QUEUED);
  }

  /** A start of another service waits on this service's pool: a replica left with nothing in flight is reported. */
  get idleWatched(): boolean {
    return Atomics.load(this.i32, IDLE_WATCHED) === 1;
  }

  /** Counts a request on its way to the control plane's queue (before the message is posted). */
  addQueued(n: number): void {
    Atomics.add(this.i32, QUEUED, n);
  }

  /** True when some replica is in rotation (the service is not cold). */
  hasReady(): boolean {
    for (let s = 0, base = HEADER; s < this.slots; s++, base += STRIDE) if (Atomics.load(this.i32, base) === READY) return true;
    return false;
  }

  /** The expected time left of the service's cold start in ms, or -1 (expected-start.ts; never with a replica ready). */
  startLeftMs(): number {
    const left = this.start.leftMs();
    return left < 0 || this.hasReady() ? -1 : left;
  }

  inflight(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot + INFLIGHT);
  }

  state(slot: number): number {
    return Atomics.load(this.i32, HEADER + STRIDE * slot);
  }
}
