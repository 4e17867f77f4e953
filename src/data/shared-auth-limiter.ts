// The authentication failure limit (docs/api.md#errors, 429 too_many_requests) for the whole
// gateway: a caller that fails AUTH_FAILURE_LIMIT times within AUTH_FAILURE_WINDOW_S is refused for
// the rest of the window, whichever workers its attempts reached. One table in a SharedArrayBuffer
// that every data plane thread reads and writes with Atomics (docs/security.md#authentication).
//
// - A caller is its address (the binary one uWS gives): IPv4 by the whole address, IPv6 by its
//   /64 (one host usually holds a whole /64), an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, a
//   dual-stack listener) as its IPv4 address. The key is [kind, high word, low word], compared in
//   full on every lookup: two callers never share a count, whatever their hashes.
// - The slot a key starts probing from is a keyed hash of it (HalfSipHash-style, with a random
//   64-bit key drawn once per gateway start and kept in the table's header), so an address cannot
//   be chosen to land on another's slots. Linear probing over PROBES slots.
// - A slot is [sequence, kind, high, low, failures, window end (seconds since 2020)]; kind 0 is a
//   slot never used (the probe chain ends there: slots are reused, never emptied).
// - Writes (a failure: rare) hold the table's lock, so two threads recording the same caller
//   never make two slots of it; each write makes its slot's sequence odd while it runs. A lookup
//   takes no lock: it reads a slot again when the sequence was odd or changed (a seqlock), so it
//   never sees half a key.
// - Bounded: a caller's failure reuses a slot whose window has ended; when every probed slot is
//   live, the one with the fewest failures is taken over (an address can wear the limit down with
//   many others, never make the table grow, never lock out another caller).
// - Hot path with no failure in the last window: one atomic load (`idle`).
import { randomFillSync } from 'node:crypto';
import { AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW_S } from '../tunables.js';

const SLOTS = 8192; // a power of two
const PROBES = 16;
const EPOCH_S = 1_577_836_800; // 2020-01-01, so seconds fit an Int32 for decades
// Header: the last failure (seconds), the writers' lock, the hash key (two words).
const LAST_FAILURE = 0;
const LOCK = 1;
const HASH_KEY = 2;
const HEADER = 4;
// A slot's fields.
const SEQ = 0;
const KIND = 1;
const HIGH = 2;
const LOW = 3;
const FAILURES = 4;
const END = 5;
const STRIDE = 6;
// Kinds of caller (0: a slot never used).
const IPV4 = 1;
const IPV6_64 = 2;
const UNKNOWN = 3;

/** The table, with a fresh random hash key: once per gateway start, shared by every thread. */
export function createAuthLimiterBuffer(): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(4 * (HEADER + SLOTS * STRIDE));
  randomFillSync(new Int32Array(buffer, 4 * HASH_KEY, 2));
  return buffer;
}

function seconds(nowMs: number): number {
  return Math.floor(nowMs / 1000) - EPOCH_S;
}

function slotAt(index: number): number {
  return HEADER + (index & (SLOTS - 1)) * STRIDE;
}

// The hash's state: module-level, so a hash allocates nothing (each thread has its own copy).
let v0 = 0;
let v1 = 0;
let v2 = 0;
let v3 = 0;

/** One SipRound on 32-bit words (HalfSipHash). */
function sipRound(): void {
  v0 = (v0 + v1) | 0;
  v1 = (v1 << 5) | (v1 >>> 27);
  v1 ^= v0;
  v0 = (v0 << 16) | (v0 >>> 16);
  v2 = (v2 + v3) | 0;
  v3 = (v3 << 8) | (v3 >>> 24);
  v3 ^= v2;
  v0 = (v0 + v3) | 0;
  v3 = (v3 << 7) | (v3 >>> 25);
  v3 ^= v0;
  v2 = (v2 + v1) | 0;
  v1 = (v1 << 13) | (v1 >>> 19);
  v1 ^= v2;
  v2 = (v2 << 16) | (v2 >>> 16);
}

/** A HalfSipHash-style keyed hash of three words: one round per word, three to finish. */
function keyedHash(k0: number, k1: number, m0: number, m1: number, m2: number): number {
  v0 = k0;
  v1 = k1;
  v2 = 0x6c796765 ^ k0;
  v3 = 0x74656462 ^ k1;
  v3 ^= m0;
  sipRound();
  v0 ^= m0;
  v3 ^= m1;
  sipRound();
  v0 ^= m1;
  v3 ^= m2;
  sipRound();
  v0 ^= m2;
  v2 ^= 0xff;
  sipRound();
  sipRound();
  sipRound();
  return v1 ^ v3;
}

export class SharedAuthLimiter {
  private readonly a: Int32Array;
  private readonly k0: number;
  private readonly k1: number;
  // The caller of the current call, set by `use` (no object per lookup).
  private kind = 0;
  private high = 0;
  private low = 0;

  constructor(buffer: SharedArrayBuffer) {
    this.a = new Int32Array(buffer);
    this.k0 = Atomics.load(this.a, HASH_KEY);
    this.k1 = Atomics.load(this.a, HASH_KEY + 1);
  }

  /** True when no address has failed within a window: the caller need not look up its address. */
  get idle(): boolean {
    const last = Atomics.load(this.a, LAST_FAILURE);
    return last === 0 || seconds(Date.now()) >= last + AUTH_FAILURE_WINDOW_S;
  }

  /** Seconds until the caller at `address` (uWS's binary form) may try again, or 0 if it is not blocked. */
  blockedFor(address: ArrayBuffer, now: number): number {
    this.use(address);
    const a = this.a;
    const start = this.start();
    for (let probe = 0; probe < PROBES; probe++) {
      const slot = slotAt(start + probe);
      let seq: number;
      let kind: number;
      let same: boolean;
      let failures: number;
      let end: number;
      do {
        seq = Atomics.load(a, slot + SEQ);
        kind = Atomics.load(a, slot + KIND);
        same = kind === this.kind && Atomics.load(a, slot + HIGH) === this.high && Atomics.load(a, slot + LOW) === this.low;
        failures = Atomics.load(a, slot + FAILURES);
        end = Atomics.load(a, slot + END);
        // Odd: a writer is in the middle of this slot; changed: it wrote meanwhile. Read again.
      } while ((seq & 1) === 1 || Atomics.load(a, slot + SEQ) !== seq);
      if (kind === 0) return 0;
      if (!same) continue;
      if (seconds(now) >= end || failures < AUTH_FAILURE_LIMIT) return 0;
      return Math.max(1, Math.ceil(end + EPOCH_S - now / 1000));
    }
    return 0;
  }

  /** Counts a failure of the caller at `address` (uWS's binary form). */
  recordFailure(address: ArrayBuffer, now: number): void {
    this.use(address);
    const a = this.a;
    const nowS = seconds(now);
    Atomics.store(a, LAST_FAILURE, nowS);
    const start = this.start();
    while (Atomics.compareExchange(a, LOCK, 0, 1) !== 0) {
      // Another thread is recording a failure: a few stores, then it lets go.
    }
    try {
      let reuse = -1;
      let fewest = -1;
      for (let probe = 0; probe < PROBES; probe++) {
        const slot = slotAt(start + probe);
        const kind = Atomics.load(a, slot + KIND);
        const end = Atomics.load(a, slot + END);
        if (kind === this.kind && Atomics.load(a, slot + HIGH) === this.high && Atomics.load(a, slot + LOW) === this.low) {
          if (nowS >= end) this.write(slot, 1, nowS + AUTH_FAILURE_WINDOW_S);
          else this.write(slot, Atomics.load(a, slot + FAILURES) + 1, end);
          return;
        }
        if (reuse < 0 && (kind === 0 || nowS >= end)) reuse = slot;
        if (kind === 0) break; // the end of the chain: the caller has no slot
        if (fewest < 0 || Atomics.load(a, slot + FAILURES) < Atomics.load(a, fewest + FAILURES)) fewest = slot;
      }
      this.write(reuse >= 0 ? reuse : fewest, 1, nowS + AUTH_FAILURE_WINDOW_S);
    } finally {
      Atomics.store(a, LOCK, 0);
    }
  }

  /** Writes the current caller's key and count into `slot` (the lock held). */
  private write(slot: number, failures: number, end: number): void {
    const a = this.a;
    const seq = Atomics.add(a, slot + SEQ, 1); // odd while writing
    Atomics.store(a, slot + KIND, this.kind);
    Atomics.store(a, slot + HIGH, this.high);
    Atomics.store(a, slot + LOW, this.low);
    Atomics.store(a, slot + FAILURES, failures);
    Atomics.store(a, slot + END, end);
    Atomics.store(a, slot + SEQ, seq + 2);
  }

  private start(): number {
    return keyedHash(this.k0, this.k1, this.kind, this.high, this.low);
  }

  /** Sets the caller's key from its binary address: 4 bytes (IPv4) or 16 (IPv6). */
  private use(address: ArrayBuffer): void {
    const b = new Uint8Array(address);
    if (b.length === 4) {
      this.set(IPV4, word(b, 0), 0);
    } else if (b.length === 16) {
      if (word(b, 0) === 0 && word(b, 4) === 0 && word(b, 8) === 0xffff) this.set(IPV4, word(b, 12), 0);
      else this.set(IPV6_64, word(b, 0), word(b, 4));
    } else {
      this.set(UNKNOWN, 0, 0); // no address (not a TCP peer): such callers share one count
    }
  }

  private set(kind: number, high: number, low: number): void {
    this.kind = kind;
    this.high = high;
    this.low = low;
  }
}

/** Four bytes from `at`, big-endian, as an Int32 (what the table stores). */
function word(b: Uint8Array, at: number): number {
  return (b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!;
}
