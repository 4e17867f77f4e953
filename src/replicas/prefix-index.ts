// Prefix-aware routing's index (`routing.prefix`): per replica slot, the block hashes of the
// prompts sent to it (src/relay/body/prompt-blocks.ts), bounded, in shared memory beside the slot
// table, so every thread reads and adds to it with no message per request.
//
// Each slot's part is a set-associative table of `indexSize` entries in buckets of WAYS: a block
// hash lives in the bucket its value names, with a stamp of when it was last sent; a new hash takes
// the bucket's empty entry or else the one with the oldest stamp (an approximate LRU: least
// recently sent within its bucket). A bucket is WAYS adjacent cells, so a lookup reads one cache
// line. Hash 0 marks an empty entry (prompt-blocks.ts never makes one).
//
// Writers, one per concern:
// - the blocks and stamps of a slot: the data plane thread that took room on that replica for a
//   request (`record`, while it holds the request, so never on a slot being reused); two threads
//   recording into the same bucket at once may lose one entry, which only costs a future hit;
// - a slot's clearing: the control plane, when the slot gets a new replica (slot-control.ts
//   `claim`, while nothing is in flight on it): a replica that left takes its index with it;
// - the counts (requests, blocks sent, blocks the replica was expected to have cached): added to
//   by the recording thread with atomics, read by the control plane (/status, metrics).
//
// Memory: HEADER cells, then per slot SLOT_CELLS counts, then per slot 2 × indexSize cells (hash,
// stamp). 8 bytes per block remembered.

const WAYS = 4;
/** Cells of the service's totals: requests, blocks, matched. */
const HEADER = 3;
/** Per slot: clock, requests, blocks, matched. */
const SLOT_CELLS = 4;
const CLOCK = 0;
const REQUESTS = 1;
const BLOCKS = 2;
const MATCHED = 3;

/** What a thread needs to build its view of the index. */
export interface PrefixIndexInit {
  buffer: SharedArrayBuffer;
  slots: number;
  /** Buckets per slot (each WAYS entries). */
  buckets: number;
}

/** Expected prompt-cache hits: requests, their hashed blocks, and the leading ones the replica had been sent. */
export interface PrefixCounts {
  requests: number;
  blocks: number;
  matched: number;
}

/** New memory for an index of `slots` replicas with at most `indexSize` blocks each. */
export function newPrefixIndex(slots: number, indexSize: number): PrefixIndexInit {
  const buckets = Math.max(1, Math.floor(indexSize / WAYS));
  return { buffer: new SharedArrayBuffer(4 * (HEADER + SLOT_CELLS * slots + 2 * WAYS * buckets * slots)), slots, buckets };
}

export class PrefixIndex {
  private readonly i32: Int32Array;
  private readonly buckets: number;
  /** Cells per slot's entries. */
  private readonly perSlot: number;
  private readonly entriesBase: number;

  constructor(readonly init: PrefixIndexInit) {
    this.i32 = new Int32Array(init.buffer);
    this.buckets = init.buckets;
    this.perSlot = 2 * WAYS * init.buckets;
    this.entriesBase = HEADER + SLOT_CELLS * init.slots;
  }

  /** Entries each slot keeps at most. */
  get capacity(): number {
    return WAYS * this.buckets;
  }

  /** How many leading blocks of `hashes` the replica in `slot` was sent (and still remembers). */
  run(slot: number, hashes: Int32Array): number {
    const a = this.i32;
    const base = this.entriesBase + slot * this.perSlot;
    let k = 0;
    for (; k < hashes.length; k++) {
      const h = hashes[k]!;
      const at = base + 2 * WAYS * ((h >>> 0) % this.buckets);
      if (a[at] !== h && a[at + 2] !== h && a[at + 4] !== h && a[at + 6] !== h) break;
    }
    return k;
  }

  /**
   * The request's blocks were sent to `slot`: each remembered (or its stamp renewed), the leading
   * ones newest, so a prefix shared by many prompts outlives their tails; counted with the run
   * the replica already had. Returns that run.
   */
  record(slot: number, hashes: Int32Array): number {
    const a = this.i32;
    const n = hashes.length;
    const cells = HEADER + SLOT_CELLS * slot;
    const start = Atomics.add(a, cells + CLOCK, n);
    const base = this.entriesBase + slot * this.perSlot;
    let matched = 0;
    let leading = true;
    for (let k = 0; k < n; k++) {
      const h = hashes[k]!;
      const stamp = (start + n - k) | 0;
      const bucket = base + 2 * WAYS * ((h >>> 0) % this.buckets);
      let at = -1;
      let oldest = bucket;
      let oldestAge = -1;
      for (let w = 0; w < WAYS; w++) {
        const e = bucket + 2 * w;
        const held = a[e]!;
        if (held === h) {
          at = e;
          break;
        }
        // An empty entry is the oldest of all.
        const age = held === 0 ? 0x7fffffff : (start - a[e + 1]!) | 0;
        if (age > oldestAge) {
          oldestAge = age;
          oldest = e;
        }
      }
      if (at >= 0) {
        if (leading) matched++;
      } else {
        leading = false;
        at = oldest;
        Atomics.store(a, at, h);
      }
      Atomics.store(a, at + 1, stamp);
    }
    Atomics.add(a, cells + REQUESTS, 1);
    Atomics.add(a, cells + BLOCKS, n);
    Atomics.add(a, cells + MATCHED, matched);
    Atomics.add(a, 0, 1);
    Atomics.add(a, 1, n);
    Atomics.add(a, 2, matched);
    return matched;
  }

  /** The slot gets a new replica: nothing of the last one's index or counts is left (the control plane, nothing in flight). */
  clear(slot: number): void {
    const base = this.entriesBase + slot * this.perSlot;
    this.i32.fill(0, base, base + this.perSlot);
    this.i32.fill(0, HEADER + SLOT_CELLS * slot, HEADER + SLOT_CELLS * (slot + 1));
  }

  /** The counts of the replica in `slot` since it got the slot. */
  slotCounts(slot: number): PrefixCounts {
    const cells = HEADER + SLOT_CELLS * slot;
    return { requests: Atomics.load(this.i32, cells + REQUESTS), blocks: Atomics.load(this.i32, cells + BLOCKS), matched: Atomics.load(this.i32, cells + MATCHED) };
  }

  /** The service's counts since it started (wrapping at 2^32: read as unsigned). */
  totals(): PrefixCounts {
    return { requests: Atomics.load(this.i32, 0) >>> 0, blocks: Atomics.load(this.i32, 1) >>> 0, matched: Atomics.load(this.i32, 2) >>> 0 };
  }

  /** Entries held now in `slot` (tests: the bound). */
  size(slot: number): number {
    const base = this.entriesBase + slot * this.perSlot;
    let n = 0;
    for (let e = base; e < base + this.perSlot; e += 2) if (this.i32[e] !== 0) n++;
    return n;
  }
}
