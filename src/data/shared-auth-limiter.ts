// The authentication failure limit (docs/api.md#errors, 429 too_many_requests) for the whole
// gateway: an address that fails AUTH_FAILURE_LIMIT times within AUTH_FAILURE_WINDOW_S is refused for the rest of
// the window, whichever workers its attempts reached. One table in a SharedArrayBuffer that
// every data plane thread reads and writes with Atomics.
//
// - Addresses are keyed by a 32-bit FNV-1a hash (never 0); a slot is [key, failures, window end
//   (seconds since 2020)]. Linear probing over PROBES slots; a slot whose window has ended is
//   reused (compare-exchange on its key). If every probed slot is live, the first is taken over:
//   the table stays bounded.
// - Hot path with no failure in the last window: one atomic load (`idle`).
import { AUTH_FAILURE_LIMIT, AUTH_FAILURE_WINDOW_S } from '../tunables.js';

const SLOTS = 8192; // a power of two
const PROBES = 16;
const EPOCH_S = 1_577_836_800; // 2020-01-01, so seconds fit an Int32 for decades
const LAST_FAILURE = 0;
const HEADER = 2;
const STRIDE = 3;

export function createAuthLimiterBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(4 * (HEADER + SLOTS * STRIDE));
}

function seconds(nowMs: number): number {
  return Math.floor(nowMs / 1000) - EPOCH_S;
}

function hash(address: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < address.length; i++) {
    h ^= address.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 1;
}

export class SharedAuthLimiter {
  private readonly a: Int32Array;

  constructor(buffer: SharedArrayBuffer) {
    this.a = new Int32Array(buffer);
  }

  /** True when no address has failed within a window: the caller need not look up its address. */
  get idle(): boolean {
    const last = Atomics.load(this.a, LAST_FAILURE);
    return last === 0 || seconds(Date.now()) >= last + AUTH_FAILURE_WINDOW_S;
  }

  /** Seconds until the address may try again, or 0 if it is not blocked. */
  blockedFor(address: string, now: number): number {
    const slot = this.find(hash(address));
    if (slot < 0) return 0;
    const a = this.a;
    const end = Atomics.load(a, slot + 2);
    const nowS = seconds(now);
    if (nowS >= end || Atomics.load(a, slot + 1) < AUTH_FAILURE_LIMIT) return 0;
    return Math.max(1, Math.ceil(end + EPOCH_S - now / 1000));
  }

  recordFailure(address: string, now: number): void {
    const a = this.a;
    const key = hash(address);
    const nowS = seconds(now);
    Atomics.store(a, LAST_FAILURE, nowS);
    const start = key & (SLOTS - 1);
    for (let probe = 0; probe < PROBES; probe++) {
      const slot = HEADER + ((start + probe) & (SLOTS - 1)) * STRIDE;
      const found = Atomics.load(a, slot);
      if (found === key) {
        if (nowS >= Atomics.load(a, slot + 2)) this.open(slot, nowS);
        else Atomics.add(a, slot + 1, 1);
        return;
      }
      if (found === 0 || nowS >= Atomics.load(a, slot + 2)) {
        if (Atomics.compareExchange(a, slot, found, key) !== found) {
          probe--; // another thread took it meanwhile: look at it again
          continue;
        }
        this.open(slot, nowS);
        return;
      }
    }
    const slot = HEADER + start * STRIDE;
    Atomics.store(a, slot, key);
    this.open(slot, nowS);
  }

  private open(slot: number, nowS: number): void {
    Atomics.store(this.a, slot + 1, 1);
    Atomics.store(this.a, slot + 2, nowS + AUTH_FAILURE_WINDOW_S);
  }

  private find(key: number): number {
    const start = key & (SLOTS - 1);
    for (let probe = 0; probe < PROBES; probe++) {
      const slot = HEADER + ((start + probe) & (SLOTS - 1)) * STRIDE;
      const found = Atomics.load(this.a, slot);
      if (found === key) return slot;
      if (found === 0) return -1;
    }
    return -1;
  }
}
