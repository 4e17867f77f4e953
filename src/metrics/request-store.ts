// Per-request counters in shared memory: each data plane thread counts into its own store (one
// writer, plain stores, no message), and the main thread sums every store when `/metrics` is
// scraped (summed.ts). Contract section 9: every relayed request is counted once, whichever
// worker served it. A store outlives its worker: a replacement counts on where it left off.
//
// Layout (Float64Array over a SharedArrayBuffer): [0] requests in flight, then per service:
//   REQUEST_ENTRIES × (key, count)   requests by status and outcome, open addressing on the key
//   2 × (buckets + 1 + sum + count)  time to first byte, duration (per-bucket counts)
//   bytes in, bytes out
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Outcomes in a fixed order, so every thread encodes them alike. */
export const OUTCOMES = [
  'ok',
  'client_closed',
  'upstream_error',
  'payload_too_large',
  'queue_full',
  'no_replica',
  'draining',
  'upstream_unavailable',
  'upstream_timeout',
  'internal_error',
] as const;
const OUTCOME_INDEX = new Map<string, number>(OUTCOMES.map((name, i) => [name, i]));

const REQUEST_ENTRIES = 64;
const HIST = LATENCY_BUCKETS.length + 3;
const PER_SERVICE = REQUEST_ENTRIES * 2 + HIST * 2 + 2;

/** What the relay reports when a request is over. */
export interface FinishedRequest {
  /** The service's index in the config. */
  service: number;
  status: number;
  outcome: string;
  bytesIn: number;
  bytesOut: number;
  /** Seconds from arrival to the first byte written to the caller; negative if none was. */
  ttfbSeconds: number;
  durationSeconds: number;
}

export function createStoreBuffer(services: number): SharedArrayBuffer {
  return new SharedArrayBuffer(8 * (1 + services * PER_SERVICE));
}

/** The writing side, in the thread that serves the requests. */
export class RequestCounter {
  private readonly f: Float64Array;
  /** `service * 2^16 + key` → index of the entry's count. */
  private readonly entries = new Map<number, number>();

  constructor(buffer: SharedArrayBuffer) {
    this.f = new Float64Array(buffer);
  }

  requestStarted(): void {
    this.f[0]! += 1;
  }

  requestFinished(r: FinishedRequest): void {
    const f = this.f;
    f[0]! -= 1;
    const base = 1 + r.service * PER_SERVICE;
    const key = r.status * 16 + (OUTCOME_INDEX.get(r.outcome) ?? OUTCOMES.length - 1) + 1;
    const cacheKey = r.service * 65_536 + key;
    let at = this.entries.get(cacheKey);
    if (at === undefined) {
      at = this.findEntry(base, key);
      if (at < 0) return; // more status/outcome pairs than entries: not counted (never seen in practice)
      this.entries.set(cacheKey, at);
    }
    f[at]! += 1;
    const hists = base + REQUEST_ENTRIES * 2;
    if (r.ttfbSeconds >= 0) observe(f, hists, r.ttfbSeconds);
    observe(f, hists + HIST, r.durationSeconds);
    const bytes = hists + HIST * 2;
    if (r.bytesIn > 0) f[bytes]! += r.bytesIn;
    if (r.bytesOut > 0) f[bytes + 1]! += r.bytesOut;
  }

  /** The index of the count for `key`, claiming an empty entry if it is new. */
  private findEntry(base: number, key: number): number {
    const f = this.f;
    for (let i = 0, h = key % REQUEST_ENTRIES; i < REQUEST_ENTRIES; i++, h = (h + 1) % REQUEST_ENTRIES) {
      const at = base + h * 2;
      if (f[at] === key) return at + 1;
      if (f[at] === 0) {
        f[at] = key;
        return at + 1;
      }
    }
    return -1;
  }
}

function observe(f: Float64Array, at: number, value: number): void {
  const buckets = LATENCY_BUCKETS;
  let i = 0;
  while (i < buckets.length && value > buckets[i]!) i++;
  f[at + i]! += 1;
  f[at + buckets.length + 1]! += value;
  f[at + buckets.length + 2]! += 1;
}

export interface HistogramSum {
  /** Per-bucket counts (not cumulative), the last one for +Inf. */
  buckets: number[];
  sum: number;
  count: number;
}

export interface ServiceSums {
  /** `status outcome` → count. */
  requests: Map<string, number>;
  ttfb: HistogramSum;
  duration: HistogramSum;
  bytesIn: number;
  bytesOut: number;
}

/** The reading side (main thread): the sums of every store. */
export function sumStores(buffers: readonly SharedArrayBuffer[], services: number): { inflight: number; services: ServiceSums[] } {
  const out: ServiceSums[] = [];
  for (let s = 0; s < services; s++) {
    out.push({ requests: new Map(), ttfb: emptyHistogram(), duration: emptyHistogram(), bytesIn: 0, bytesOut: 0 });
  }
  let inflight = 0;
  for (const buffer of buffers) {
    const f = new Float64Array(buffer);
    inflight += f[0]!;
    for (let s = 0; s < services; s++) {
      const sums = out[s]!;
      const base = 1 + s * PER_SERVICE;
      for (let e = 0; e < REQUEST_ENTRIES; e++) {
        const key = f[base + e * 2]!;
        const count = f[base + e * 2 + 1]!;
        if (key === 0 || count === 0) continue;
        const label = `${Math.floor((key - 1) / 16)} ${OUTCOMES[(key - 1) % 16] ?? 'internal_error'}`;
        sums.requests.set(label, (sums.requests.get(label) ?? 0) + count);
      }
      const hists = base + REQUEST_ENTRIES * 2;
      addHistogram(sums.ttfb, f, hists);
      addHistogram(sums.duration, f, hists + HIST);
      sums.bytesIn += f[hists + HIST * 2]!;
      sums.bytesOut += f[hists + HIST * 2 + 1]!;
    }
  }
  return { inflight, services: out };
}

/** A thread died: what it had in flight is gone with it. */
export function resetInflight(buffer: SharedArrayBuffer): void {
  new Float64Array(buffer)[0] = 0;
}

function emptyHistogram(): HistogramSum {
  return { buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
}

function addHistogram(h: HistogramSum, f: Float64Array, at: number): void {
  for (let i = 0; i <= LATENCY_BUCKETS.length; i++) h.buckets[i]! += f[at + i]!;
  h.sum += f[at + LATENCY_BUCKETS.length + 1]!;
  h.count += f[at + LATENCY_BUCKETS.length + 2]!;
}
