// Per-request counters in plain typed arrays: what the hot path pays for metrics (a few array
// additions), read and summed by the prom-client collectors only when /metrics is scraped.
// Requests are counted when they finish; streamed answers also as their events pass
// (StreamCounters), so a scrape during a long stream sees its events.
//
// A store lives in one ArrayBuffer or SharedArrayBuffer with a fixed layout: the services are
// known at start, the outcomes and histogram buckets are fixed. With worker threads, each thread
// counts into its own store (one writer per store) and the main thread sums every store at a
// scrape. Values are float64 (exact integers up to 2^53), written without Atomics (there is no
// atomic add for float64, and one writer needs none); a reader may see a store a few increments
// behind its writer. V8 reads and writes an aligned float64 element with one 8-byte access on
// x64 and arm64, so a reader does not see half of a write in practice (the language does not
// promise it for non-atomic accesses). A new pair key is published with Atomics.store after
// its count.
//
// Statuses: `sluice_requests_total` keeps the exact status. Each service has a small
// open-addressed table of PAIR_SLOTS (status, outcome) pairs; a status outside 100..999, or a
// pair arriving when the table is full (64 distinct pairs for one service in one store), is
// counted under status "other" for its outcome. So the label set is bounded: at most
// PAIR_SLOTS + one "other" per outcome for each service.
import { OUTCOMES as REQUEST_OUTCOMES } from '../http/errors.js';
import { TokenUsage, tokenUsageBytes } from './token-usage.js';

/** Bucket bounds (seconds) of the time-to-first-byte and duration histograms. */
export const LATENCY_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * Bucket bounds (seconds) of the stream histograms (time to first event, time between events):
 * 1 ms to 60 s, closer together where token latencies usually are (10 to 100 ms).
 */
export const STREAM_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Why a streamed answer failed after its status line: the `reason` of its interruption. */
export const INTERRUPTIONS = ['upstream_reset', 'upstream_idle', 'draining'] as const;
export type Interruption = (typeof INTERRUPTIONS)[number];

/**
 * Every outcome a request can end with (http/errors.ts: `ok` or one of Sluice's error codes), plus
 * `other` for an outcome name that list does not know (none should reach here): counted, not lost.
 */
export const OUTCOMES: readonly string[] = [...REQUEST_OUTCOMES, 'other'];
const OUTCOME_INDEX = new Map(OUTCOMES.map((name, index) => [name, index]));
const OTHER_OUTCOME = OUTCOMES.length - 1;
// A pair key holds the outcome in 5 bits.
if (OUTCOMES.length > 32) throw new Error('too many outcomes for the counter layout');

/** (status, outcome) pairs kept with their exact status, per service and store. A power of two. */
export const PAIR_SLOTS = 64;

/** Float64 slots of a histogram: a count per bucket, the +Inf bucket, the sum. */
const LATENCY_SLOTS = LATENCY_BUCKETS.length + 2;
const STREAM_SLOTS = STREAM_BUCKETS.length + 2;

// Float64 offsets inside one service's block.
const PAIRS = 0;
const OVERFLOW = PAIRS + PAIR_SLOTS;
const TTFB = OVERFLOW + OUTCOMES.length;
const DURATION = TTFB + LATENCY_SLOTS;
const BYTES_IN = DURATION + LATENCY_SLOTS;
const BYTES_OUT = BYTES_IN + 1;
// Streamed answers (text/event-stream), counted as their events pass (StreamCounters).
const STREAM_EVENTS = BYTES_OUT + 1;
/** A gauge: streams opened minus streams closed by this store's thread. */
const STREAMS_ACTIVE = STREAM_EVENTS + 1;
const STREAM_INTERRUPTIONS = STREAMS_ACTIVE + 1;
const FIRST_EVENT = STREAM_INTERRUPTIONS + INTERRUPTIONS.length;
const BETWEEN_EVENTS = FIRST_EVENT + STREAM_SLOTS;
const SERVICE_F64 = BETWEEN_EVENTS + STREAM_SLOTS;
/** After the services' blocks: spans of traces exported, dropped for a full queue, lost in a failed export (tracing/span-export.ts). */
const TRACE_SLOTS = 3;

/** Which histogram of a service. */
export type HistogramName = 'ttfb' | 'duration' | 'firstEvent' | 'betweenEvents';

const HISTOGRAMS: Record<HistogramName, { at: number; bounds: readonly number[] }> = {
  ttfb: { at: TTFB, bounds: LATENCY_BUCKETS },
  duration: { at: DURATION, bounds: LATENCY_BUCKETS },
  firstEvent: { at: FIRST_EVENT, bounds: STREAM_BUCKETS },
  betweenEvents: { at: BETWEEN_EVENTS, bounds: STREAM_BUCKETS },
};

/** The fixed shape of a store: the services, in order, and the routers' blocks of token usage. Every store of a gateway shares one. */
export class CounterLayout {
  readonly slugs: readonly string[];
  /** Blocks for routers' token usage (token-usage.ts: `routerUsageBlocks`), fixed at start. */
  readonly routers: number;
  /** Bytes a store of this layout needs. */
  readonly byteLength: number;
  /** Float64 slots: every service's block, then the in-flight gauge. */
  readonly f64Length: number;
  /** Where the LLM token usage region starts (token-usage.ts), after the pair keys. */
  readonly tokenUsageAt: number;
  private readonly index: Map<string, number>;

  constructor(slugs: readonly string[], routers = 0) {
    this.slugs = [...slugs];
    this.routers = routers;
    this.index = new Map(this.slugs.map((slug, i) => [slug, i]));
    if (this.index.size !== this.slugs.length) throw new Error('duplicate service slug in the counter layout');
    this.f64Length = this.slugs.length * SERVICE_F64 + TRACE_SLOTS + 1;
    // Then the pair keys: one int32 per slot (PAIR_SLOTS is even: what follows is 8-aligned);
    // then the LLM token usage.
    this.tokenUsageAt = this.f64Length * 8 + this.slugs.length * PAIR_SLOTS * 4;
    this.byteLength = this.tokenUsageAt + tokenUsageBytes(this.slugs.length, routers);
  }

  /** The service's position in every store, or -1 for a slug the layout does not have. */
  serviceIndex(slug: string): number {
    return this.index.get(slug) ?? -1;
  }
}

/** One (status, outcome) count read from a store. */
export interface PairCount {
  /** The exact status, or `other` (see the file comment). */
  status: string;
  outcome: string;
  count: number;
}

/** One thread's counters. Only that thread writes; any thread may read. */
export class RequestCounters {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
  private readonly f64: Float64Array;
  /** Per service, PAIR_SLOTS keys: `status * 32 + outcome + 1`, 0 for a free slot. */
  private readonly keys: Int32Array;
  private readonly inflightAt: number;
  /** LLM token usage by service (or router) and token. */
  readonly tokens: TokenUsage;

  constructor(
    readonly layout: CounterLayout,
    buffer?: ArrayBuffer | SharedArrayBuffer,
  ) {
    this.buffer = buffer ?? new ArrayBuffer(layout.byteLength);
    if (this.buffer.byteLength !== layout.byteLength) {
      throw new Error(`a counter store of this layout needs ${layout.byteLength} bytes, not ${this.buffer.byteLength}`);
    }
    this.f64 = new Float64Array(this.buffer, 0, layout.f64Length);
    this.keys = new Int32Array(this.buffer, layout.f64Length * 8, layout.slugs.length * PAIR_SLOTS);
    this.inflightAt = layout.f64Length - 1;
    this.tokens = new TokenUsage(this.buffer, layout.tokenUsageAt, layout.slugs.length, layout.routers);
  }

  // ── the hot path ───────────────────────────────────────────────────────────────────────────

  started(): void {
    this.f64[this.inflightAt]! += 1;
  }

  /**
   * Counts a finished request. `ttfbSeconds` is negative when no byte reached the caller (not
   * observed then). A slug the layout does not have only leaves the in-flight count.
   */
  finished(slug: string, status: number, outcome: string, bytesIn: number, bytesOut: number, ttfbSeconds: number, durationSeconds: number): void {
    const f64 = this.f64;
    f64[this.inflightAt]! -= 1;
    const service = this.layout.serviceIndex(slug);
    if (service < 0) return;
    const base = service * SERVICE_F64;
    this.countPair(service, base, status, OUTCOME_INDEX.get(outcome) ?? OTHER_OUTCOME);
    if (ttfbSeconds >= 0) observe(f64, base + TTFB, ttfbSeconds, LATENCY_BUCKETS);
    observe(f64, base + DURATION, durationSeconds, LATENCY_BUCKETS);
    if (bytesIn > 0) f64[base + BYTES_IN]! += bytesIn;
    if (bytesOut > 0) f64[base + BYTES_OUT]! += bytesOut;
  }

  private countPair(service: number, base: number, status: number, outcome: number): void {
    if (status >= 100 && status <= 999 && Number.isInteger(status)) {
      const key = status * 32 + outcome + 1;
      const keys = this.keys;
      const keyBase = service * PAIR_SLOTS;
      let slot = (status * 7 + outcome) & (PAIR_SLOTS - 1);
      for (let probe = 0; probe < PAIR_SLOTS; probe++) {
        const found = keys[keyBase + slot];
        if (found === key) {
          this.f64[base + PAIRS + slot]! += 1;
          return;
        }
        if (found === 0) {
          // The count first, then the key: a reader that sees the key sees its count.
          this.f64[base + PAIRS + slot]! += 1;
          Atomics.store(keys, keyBase + slot, key);
          return;
        }
        slot = (slot + 1) & (PAIR_SLOTS - 1);
      }
    }
    this.f64[base + OVERFLOW + outcome]! += 1;
  }

  /** The stream counters of the service at `service` (its index in the layout), for this thread's relay. */
  streams(service: number): StreamCounters {
    return new StreamCounters(this.f64, service * SERVICE_F64);
  }

  /** Spans of this thread's traces sent to the collector (tracing/span-export.ts: `SpanCounts`). */
  spansExported(n: number): void {
    this.f64[this.layout.slugs.length * SERVICE_F64]! += n;
  }

  /** Spans dropped: the export queue was full, or their export failed. */
  spansDropped(n: number, reason: 'queue_full' | 'export_failed'): void {
    this.f64[this.layout.slugs.length * SERVICE_F64 + (reason === 'queue_full' ? 1 : 2)]! += n;
  }

  /** [exported, dropped for a full queue, lost in a failed export] so far. */
  spans(): [number, number, number] {
    const at = this.layout.slugs.length * SERVICE_F64;
    return [this.f64[at]!, this.f64[at + 1]!, this.f64[at + 2]!];
  }

  /** Its writing thread died (worker threads): what it had in flight, streams too, is gone with it. */
  forgetInflight(): void {
    this.f64[this.inflightAt] = 0;
    for (let service = 0; service < this.layout.slugs.length; service++) this.f64[service * SERVICE_F64 + STREAMS_ACTIVE] = 0;
  }

  // ── reading (at a scrape) ──────────────────────────────────────────────────────────────────

  get inflight(): number {
    return this.f64[this.inflightAt]!;
  }

  /** Calls `add` for every (status, outcome) pair of the service counted at least once. */
  forEachPair(service: number, add: (status: string, outcome: string, count: number) => void): void {
    const base = service * SERVICE_F64;
    const keyBase = service * PAIR_SLOTS;
    for (let slot = 0; slot < PAIR_SLOTS; slot++) {
      const key = Atomics.load(this.keys, keyBase + slot);
      if (key === 0) continue;
      add(String(Math.floor((key - 1) / 32)), OUTCOMES[(key - 1) % 32]!, this.f64[base + PAIRS + slot]!);
    }
    for (let outcome = 0; outcome < OUTCOMES.length; outcome++) {
      const count = this.f64[base + OVERFLOW + outcome]!;
      if (count > 0) add('other', OUTCOMES[outcome]!, count);
    }
  }

  /** Adds the service's histogram into `into`: per-bucket counts (not cumulative), +Inf, then the sum. */
  addHistogram(service: number, name: HistogramName, into: Float64Array): void {
    const { at, bounds } = HISTOGRAMS[name];
    const from = service * SERVICE_F64 + at;
    for (let i = 0; i < bounds.length + 2; i++) into[i]! += this.f64[from + i]!;
  }

  bytes(service: number, direction: 'in' | 'out'): number {
    return this.f64[service * SERVICE_F64 + (direction === 'in' ? BYTES_IN : BYTES_OUT)]!;
  }

  streamEvents(service: number): number {
    return this.f64[service * SERVICE_F64 + STREAM_EVENTS]!;
  }

  streamsActive(service: number): number {
    return this.f64[service * SERVICE_F64 + STREAMS_ACTIVE]!;
  }

  /** Interruptions of the service's streams, in the order of INTERRUPTIONS. */
  interruptions(service: number, reason: number): number {
    return this.f64[service * SERVICE_F64 + STREAM_INTERRUPTIONS + reason]!;
  }
}

/**
 * What the relay counts about one service's streamed answers, in its thread's store: array
 * additions as events pass. Events written to the caller together (in one read from the replica)
 * share one arrival time, so after the first of them each has a gap of 0: the histogram of gaps
 * gets one observation per event after the answer's first, and its sum over an answer is the
 * time from its first event to its last.
 */
export class StreamCounters {
  constructor(
    private readonly f64: Float64Array,
    private readonly base: number,
  ) {}

  opened(): void {
    this.f64[this.base + STREAMS_ACTIVE]! += 1;
  }

  closed(interruption: Interruption | undefined): void {
    this.f64[this.base + STREAMS_ACTIVE]! -= 1;
    if (interruption !== undefined) this.f64[this.base + STREAM_INTERRUPTIONS + INTERRUPTIONS.indexOf(interruption)]! += 1;
  }

  /** The answer's first `count` events, written `seconds` after the request arrived. */
  firstEvents(count: number, seconds: number): void {
    const f64 = this.f64;
    f64[this.base + STREAM_EVENTS]! += count;
    observe(f64, this.base + FIRST_EVENT, seconds, STREAM_BUCKETS);
    if (count > 1) f64[this.base + BETWEEN_EVENTS]! += count - 1;
  }

  /** `count` more events, written `gapSeconds` after the answer's previous ones. */
  laterEvents(count: number, gapSeconds: number): void {
    const f64 = this.f64;
    f64[this.base + STREAM_EVENTS]! += count;
    observe(f64, this.base + BETWEEN_EVENTS, gapSeconds, STREAM_BUCKETS);
    if (count > 1) f64[this.base + BETWEEN_EVENTS]! += count - 1;
  }
}

/** A histogram's slots as `addHistogram` fills them. */
export function histogramSlots(name: HistogramName): Float64Array {
  return new Float64Array(HISTOGRAMS[name].bounds.length + 2);
}

function observe(f64: Float64Array, at: number, value: number, bounds: readonly number[]): void {
  const n = bounds.length;
  let bucket = 0;
  while (bucket < n && value > bounds[bucket]!) bucket++;
  f64[at + bucket]! += 1;
  f64[at + n + 1]! += value;
}

/** Every service's totals over several stores (one per thread), as the collectors render them. */
export interface ServiceTotals {
  slug: string;
  /** By `status outcome`. */
  requests: Map<string, PairCount>;
  ttfb: Float64Array;
  duration: Float64Array;
  bytesIn: number;
  bytesOut: number;
  streamEvents: number;
  streamsActive: number;
  /** In the order of INTERRUPTIONS. */
  interruptions: number[];
  firstEvent: Float64Array;
  betweenEvents: Float64Array;
  /** LLM tokens by token name: [prompt, completion]. */
  llmTokens: Map<string, [number, number]>;
}

export interface CounterTotals {
  services: ServiceTotals[];
  /** Each router that counted in any store: its tokens' LLM usage, [prompt, completion] by name. */
  routers: Map<string, Map<string, [number, number]>>;
  inflight: number;
  /** Spans of traces: exported, dropped for a full queue, lost in a failed export. */
  spans: [number, number, number];
}

/** Whether stores of these layouts count the same services in the same places. */
export function sameLayout(a: CounterLayout, b: CounterLayout): boolean {
  return a === b || (a.routers === b.routers && a.slugs.length === b.slugs.length && a.slugs.every((slug, i) => b.slugs[i] === slug));
}

/** Adds a block's LLM token usage in `store` into `into` (by token name). */
function addUsage(store: RequestCounters, block: number, into: Map<string, [number, number]>): void {
  store.tokens.forEach(block, (token, prompt, completion) => {
    const sum = into.get(token);
    if (sum === undefined) into.set(token, [prompt, completion]);
    else {
      sum[0] += prompt;
      sum[1] += completion;
    }
  });
}

/** Sums stores of one layout (see `sameLayout`). */
export function sumCounters(layout: CounterLayout, stores: readonly RequestCounters[]): CounterTotals {
  const services = layout.slugs.map((slug): ServiceTotals => ({
    slug,
    requests: new Map(),
    ttfb: histogramSlots('ttfb'),
    duration: histogramSlots('duration'),
    bytesIn: 0,
    bytesOut: 0,
    streamEvents: 0,
    streamsActive: 0,
    interruptions: INTERRUPTIONS.map(() => 0),
    firstEvent: histogramSlots('firstEvent'),
    betweenEvents: histogramSlots('betweenEvents'),
    llmTokens: new Map(),
  }));
  const routers = new Map<string, Map<string, [number, number]>>();
  let inflight = 0;
  const spans: [number, number, number] = [0, 0, 0];
  for (const store of stores) {
    inflight += store.inflight;
    const [exported, queueFull, failed] = store.spans();
    spans[0] += exported;
    spans[1] += queueFull;
    spans[2] += failed;
    store.tokens.forEachRouter((slug, block) => {
      let tokens = routers.get(slug);
      if (tokens === undefined) routers.set(slug, (tokens = new Map()));
      addUsage(store, block, tokens);
    });
    services.forEach((totals, service) => {
      store.forEachPair(service, (status, outcome, count) => {
        const key = `${status} ${outcome}`;
        const pair = totals.requests.get(key);
        if (pair === undefined) totals.requests.set(key, { status, outcome, count });
        else pair.count += count;
      });
      store.addHistogram(service, 'ttfb', totals.ttfb);
      store.addHistogram(service, 'duration', totals.duration);
      totals.bytesIn += store.bytes(service, 'in');
      totals.bytesOut += store.bytes(service, 'out');
      totals.streamEvents += store.streamEvents(service);
      totals.streamsActive += store.streamsActive(service);
      for (let reason = 0; reason < INTERRUPTIONS.length; reason++) totals.interruptions[reason]! += store.interruptions(service, reason);
      store.addHistogram(service, 'firstEvent', totals.firstEvent);
      store.addHistogram(service, 'betweenEvents', totals.betweenEvents);
      addUsage(store, service, totals.llmTokens);
    });
  }
  return { services, routers, inflight, spans };
}
