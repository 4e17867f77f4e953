// The replicas that hold the state a request names (docs/api.md#stored-state-across-replicas): a
// stored response (`resp_…`, the Responses API's `previous_response_id`) or a conversation
// (`conv_…`), which a model server such as vLLM keeps only in the memory of the process that made
// it. One table per service, in shared memory beside its slot table, so every thread of the
// gateway reads and writes the same ids with no message: a follow-up is routed on any worker
// thread by a few reads, and an id is learned by the thread that relayed the answer that names it.
//
// Bounded by construction: STATE_IDS_SETS sets of STATE_IDS_WAYS entries; an id hashes to one set,
// and a new id in a full set takes the place of the entry written longest ago there (a counter per
// set). An entry holds the id's two 32-bit hashes (64 bits: two ids that collide share a replica,
// at odds of about one in 2^64 / table size), the replica's slot and the slot's generation: a slot
// that got another replica since has another generation, so a replica gone and replaced never
// receives the old replica's follow-ups.
//
// Written by any thread, read by any thread, without a lock: a writer clears the entry's check,
// writes its fields, then stores the check (a mix of the four fields); a reader takes an entry only
// when the check it read before and after matches the fields it read. Two writers racing on one
// entry leave a check that matches neither, which reads as no entry: the follow-up is picked as
// usual.
import { hashKey } from './affinity-ring.js';

/** Sets in a service's table, and entries per set: 4,096 ids per service (80 KiB of shared memory). */
const STATE_IDS_SETS = 1024;
const STATE_IDS_WAYS = 4;
/** Ints per entry: hash, second hash, slot, generation, check. */
const ENTRY = 5;
const COUNTERS = STATE_IDS_SETS;

/** The second 32-bit hash of `text`: FNV-1a with another basis, finished with another mixer. */
function secondHash(text: string): number {
  let h = 0x6c62272e;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  h = Math.imul(h, 0x297a2d39);
  h ^= h >>> 15;
  return h | 0;
}

/** The check of an entry's fields; never 0 (an empty entry's). */
function checkOf(h1: number, h2: number, slot: number, gen: number): number {
  return (Math.imul(h1 ^ Math.imul(h2, 0x9e3779b1), 0x85ebca6b) ^ Math.imul(slot + 1, 0xc2b2ae35) ^ Math.imul(gen, 0x27d4eb2f)) | 1;
}

export class StateIds {
  /** The number of ids a service's table holds at most. */
  static readonly capacity = STATE_IDS_SETS * STATE_IDS_WAYS;
  private readonly a: Int32Array;
  /** The generation of the slot the last `find` returned. */
  gen = 0;

  static create(): SharedArrayBuffer {
    return new SharedArrayBuffer(4 * (COUNTERS + STATE_IDS_SETS * STATE_IDS_WAYS * ENTRY));
  }

  constructor(readonly buffer: SharedArrayBuffer) {
    this.a = new Int32Array(buffer);
  }

  /** The slot of the replica that answered with `id` (its generation in `gen`), or -1 when none is known. */
  find(id: string): number {
    const a = this.a;
    const h1 = hashKey(id) | 0;
    const h2 = secondHash(id);
    const first = COUNTERS + (h1 & (STATE_IDS_SETS - 1)) * STATE_IDS_WAYS * ENTRY;
    for (let w = 0, e = first; w < STATE_IDS_WAYS; w++, e += ENTRY) {
      const check = Atomics.load(a, e + 4);
      if (check === 0 || a[e] !== h1 || a[e + 1] !== h2) continue;
      const slot = a[e + 2]!;
      const gen = a[e + 3]!;
      if (checkOf(h1, h2, slot, gen) !== check || Atomics.load(a, e + 4) !== check) continue;
      this.gen = gen;
      return slot;
    }
    return -1;
  }

  /** Records that the replica in `slot` (generation `gen`) answered with `id`. */
  learn(id: string, slot: number, gen: number): void {
    const a = this.a;
    const h1 = hashKey(id) | 0;
    const h2 = secondHash(id);
    const set = h1 & (STATE_IDS_SETS - 1);
    const first = COUNTERS + set * STATE_IDS_WAYS * ENTRY;
    let e = -1;
    for (let w = 0, at = first; w < STATE_IDS_WAYS; w++, at += ENTRY) {
      if (a[at] === h1 && a[at + 1] === h2 && Atomics.load(a, at + 4) !== 0) {
        e = at;
        break;
      }
    }
    if (e < 0) e = first + (Atomics.add(a, set, 1) & (STATE_IDS_WAYS - 1)) * ENTRY;
    Atomics.store(a, e + 4, 0);
    a[e] = h1;
    a[e + 1] = h2;
    a[e + 2] = slot;
    a[e + 3] = gen;
    Atomics.store(a, e + 4, checkOf(h1, h2, slot, gen));
  }
}
