// The layout of the limit table's memory (docs/architecture.md#the-limit-table): what each cell of
// its Int32Array holds. The request path's side is limit-table.ts, the control plane's
// limit-control.ts and, for the shared store's fields, store-cells.ts.
//
// The header: the base time (a Float64 in words 0 and 1), the threads, the cell sets; written once
// before the buffer is shared. Then one cell set per limited (service, token), STRIDE words each,
// then per data plane thread and cell set what that thread's requests hold (concurrent places,
// reserved tokens).
import { WINDOW_S } from './token-window.js';

/** The limits a request can be refused by, in the order they are checked; also the refusal counters' order. */
export const LIMIT_NAMES = ['concurrent', 'requestsPerMinute', 'tokensPerMinute', 'tokensPerDay', 'tokensPerMonth'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

export const TICKS_PER_MS = 256;
/** A minute (the requestsPerMinute and tokensPerMinute window) in ticks. */
export const WINDOW_TICKS = WINDOW_S * 1000 * TICKS_PER_MS;
export const EPOCH_S = 1_577_836_800; // 2020-01-01: seconds fit an Int32 for decades

// The header.
export const THREADS = 2;
export const CELL_SETS = 3;
export const STORE = 4; // LOCAL, STORE_UP or STORE_DOWN: where the counts live and whether the store answers
export const DOORBELL = 5; // bumped (and notified) by a thread that needs a top-up from the store
export const REFUSE_WHEN_DOWN = 6; // 1: `onStoreDown: refuse`
export const HEADER = 16;
export const LOCAL = 0;
export const STORE_UP = 1;
export const STORE_DOWN = 2;
// A cell set's fields.
export const TAT = 0;
export const INFLIGHT = 1;
export const RESERVED = 2;
export const GEN = 3;
export const REFUSED = 4; // five counters, in LIMIT_NAMES order
// The shared store's part (0 without one).
export const LEASE = 9; // requests of requestsPerMinute leased to this gateway, not used yet
export const SLOTS = 10; // places of `concurrent` the store gave this gateway
export const REMOTE = 11; // tokens of the window counted by other gateways (settled and reserved)
export const EXHAUSTED = 12; // tick until which the store grants no request (its Retry-After)
export const NEED = 13; // requests that asked for a top-up since the control plane last looked
export const SEQ = 14; // bumped by each top-up: what a waiting request waits on
export const FULL = 15; // 1: at the last sync the store had no place of `concurrent` beyond SLOTS
export const LEFT = 16; // requests of requestsPerMinute the store would still grant at the last sync, beyond the leases
export const ROOM = 17; // places of `concurrent` the other gateways left at the last sync
// tokensPerDay and tokensPerMonth (calendar-window.ts): each a bucket (its period, tokens settled
// here), then what other gateways counted in it (its period, tokens settled and reserved).
export const DAY = 18;
export const MONTH = 20;
export const REMOTE_DAY = 22;
export const REMOTE_MONTH = 24;
export const BUCKETS = 26; // WINDOW_S × (second, count): token-window.ts
export const STRIDE = BUCKETS + 2 * WINDOW_S;

/** The wall clock in ms, as every thread reads it (the base time and the token window's seconds). */
export function clock(): number {
  return performance.timeOrigin + performance.now();
}
