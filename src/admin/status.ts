// `GET /status` and the figures of the service overview page.
//
// What is true now (state, replicas, queue, in flight) is read from the replica sets at each call.
// What happened (requests per second, time to first byte, errors, streamed events and their
// timing) comes from the counters the relay already keeps: a sampler reads them once a second
// into a ring of the last five minutes, and the figures are differences between samples (for a
// histogram, of its bucket counts). The hot path pays nothing for any of it.
import type { Config } from '../config/types.js';
import type { Logger } from '../log/logger.js';
import type { LimitUse } from '../limits/limit-control.js';
import type { PoolStatus } from './pool-status.js';
import { type RoutersNow, type RouterStatus, routerStatuses } from './router-status.js';
import { type ServiceState, serviceState } from './service-state.js';
import type { LiveService, ReplicaEjectionStatus, ReplicaLoadStatus, RoutingStatus, ServiceCounters, StatusSource } from './status-source.js';
import { SAMPLE_INTERVAL_MS } from '../tunables.js';

/** Five minutes of one-second samples. */
const STATUS_HISTORY_SAMPLES = 300;

/** Requests per second are averaged over this many samples (10 s). */
const STATUS_RATE_SAMPLES = 10;

/** Time to first byte and errors cover the last minute. */
const STATUS_MINUTE_SAMPLES = 60;

/** A chart point's quantiles (time to first byte, to first event, between events) cover this many samples. */
const STATUS_POINT_SAMPLES = 10;

export interface ServiceStatus {
  slug: string;
  baseUrl: string;
  kind: LiveService['kind'];
  state: ServiceState;
  replicas: Record<string, number>;
  queued: number;
  inflight: number;
  /** The choice policy, and the affinity header if any. */
  routing: RoutingStatus;
  /** Each ready replica's last load reading (empty unless the service reads loads). */
  loads: ReplicaLoadStatus[];
  /** Each replica ejected now or before for consecutive failures: ejected, until, reason, ejections. */
  ejections: ReplicaEjectionStatus[];
  /** How long a start of a replica is expected to take (the median of the recent ones), in ms; null before any was measured. */
  expectedStartMs: number | null;
  /** Requests per second over the last 10 s. */
  requestsPerSecond: number;
  /** Time to first byte over the last minute, in ms; null without requests. */
  ttfbMs: { p50: number | null; p99: number | null };
  lastMinute: { requests: number; errors: number };
  /** Streamed answers (text/event-stream): relayed now, and their events over the last minute. */
  stream: StreamStatus;
  /** Each limited token's use against its limits now (empty: no token of the service is limited). */
  limits: TokenLimitStatus[];
}

/** A limited token: its name and, per limit it has, the limit and what is used of it. */
type TokenLimitStatus = { token: string } & LimitUse;

interface StreamStatus {
  /** Streams being relayed (at the last sample, at most a second old). */
  active: number;
  eventsPerSecond: number;
  /** Time to first event (token) and between events, in ms; null without events. */
  firstEventMs: Quantiles;
  betweenEventsMs: Quantiles;
}

interface Quantiles {
  p50: number | null;
  p99: number | null;
}

/** One point of a service's charts, one per sample. */
export interface ChartPoint {
  /** Epoch ms of the sample. */
  t: number;
  rps: number;
  queued: number;
  inflight: number;
  ttfbP50: number | null;
  ttfbP99: number | null;
  errors: number;
  /** Time to first event and between events of streamed answers, over the same window as TTFB. */
  firstEventP50: number | null;
  firstEventP99: number | null;
  betweenEventsP50: number | null;
  betweenEventsP99: number | null;
}

/** The rows always present in `replicas`, even at zero, so a reader sees stable keys. */
const LIVE_STATES = ['starting', 'ready', 'unreachable', 'draining'];

/** Samples of one service: cumulative counters at each tick, oldest overwritten first. */
class Ring {
  readonly t = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly requests = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly errors = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly queued = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly inflight = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly events = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly streamsActive = new Float64Array(STATUS_HISTORY_SAMPLES);
  readonly ttfb: Histories;
  readonly firstEvent: Histories;
  readonly betweenEvents: Histories;
  /** The chart point of each sample, computed once when it is taken. */
  readonly points: ChartPoint[] = [];
  /** Samples written so far (the newest is at `(count - 1) % STATUS_HISTORY_SAMPLES`). */
  count = 0;

  constructor(ttfbBounds: readonly number[], streamBounds: readonly number[]) {
    this.ttfb = new Histories(ttfbBounds);
    this.firstEvent = new Histories(streamBounds);
    this.betweenEvents = new Histories(streamBounds);
  }

  push(t: number, c: ServiceCounters, live: LiveService | undefined): void {
    const i = this.count % STATUS_HISTORY_SAMPLES;
    this.t[i] = t;
    this.requests[i] = c.requests;
    this.errors[i] = c.errors;
    this.queued[i] = live?.queued ?? 0;
    this.inflight[i] = live?.inflight ?? 0;
    this.events[i] = c.events;
    this.streamsActive[i] = c.streamsActive;
    this.ttfb.set(i, c.ttfb);
    this.firstEvent.set(i, c.firstEvent);
    this.betweenEvents.set(i, c.betweenEvents);
    this.count += 1;
  }

  /** The slot of the sample `back` ticks before the newest, clamped to the oldest kept. */
  slot(back: number): number {
    const kept = Math.min(this.count, STATUS_HISTORY_SAMPLES);
    const b = Math.min(back, kept - 1);
    return (this.count - 1 - b) % STATUS_HISTORY_SAMPLES;
  }
}

/** One histogram's cumulative bucket counts at each sample of a ring. */
class Histories {
  private readonly n: number;
  private readonly counts: Float64Array;

  constructor(readonly bounds: readonly number[]) {
    this.n = bounds.length + 1;
    this.counts = new Float64Array(STATUS_HISTORY_SAMPLES * this.n);
  }

  set(slot: number, cumulative: readonly number[]): void {
    this.counts.set(cumulative, slot * this.n);
  }

  /** p50 and p99 in ms of what was observed between the samples in slots `from` and `to`. */
  quantiles(from: number, to: number): Quantiles {
    const n = this.n;
    const delta = new Float64Array(n);
    for (let b = 0; b < n; b++) delta[b] = this.counts[to * n + b]! - this.counts[from * n + b]!;
    return { p50: ms(quantile(0.5, this.bounds, delta)), p99: ms(quantile(0.99, this.bounds, delta)) };
  }
}

/**
 * The value below which a fraction `q` of the observations fall, from cumulative bucket counts
 * (Prometheus' `histogram_quantile`: linear within the bucket; the +Inf bucket gives the highest
 * finite bound). Null when there are no observations.
 */
export function quantile(q: number, bounds: readonly number[], cumulative: ArrayLike<number>): number | null {
  const total = cumulative[bounds.length] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < bounds.length; i++) {
    const at = cumulative[i]!;
    if (at >= rank) {
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      const inBucket = at - below;
      return inBucket <= 0 ? bounds[i]! : lower + (bounds[i]! - lower) * ((rank - below) / inBucket);
    }
    below = at;
  }
  return bounds[bounds.length - 1] ?? null;
}

export interface StatusBoardOptions {
  config: Config;
  source: StatusSource;
  logger: Logger;
  /** The relay listener's port (known once it listens). */
  relayPort: () => number;
  /** Called after each sample, e.g. to push it to the page's event streams. */
  onSample?: () => void;
  /** Every limited token's use now (limits/limit-cells.ts). */
  limits?: () => readonly { service: string; token: string; use: LimitUse }[];
  /** Every pool's units, holders and waiting services now (control/pools/). */
  pools?: () => PoolStatus[];
  /** The routers and the services' models as last applied (start or SIGHUP); default: the config's. */
  routers?: () => RoutersNow;
}

export class StatusBoard {
  private readonly rings = new Map<string, Ring>();
  private readonly timer: NodeJS.Timeout;
  private sampling = false;
  private lastError = 0;

  constructor(private readonly options: StatusBoardOptions) {
    for (const s of options.config.services) this.rings.set(s.slug, new Ring(options.source.ttfbBounds, options.source.streamBounds));
    this.timer = setInterval(() => void this.sample(), SAMPLE_INTERVAL_MS).unref();
    void this.sample();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Reads the counters once and appends a sample per service. */
  async sample(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const counters = await this.options.source.counters();
      const live = new Map(this.options.source.now().map((s) => [s.slug, s]));
      const t = Date.now();
      for (const [slug, ring] of this.rings) {
        const c = counters.get(slug);
        if (c === undefined) continue;
        ring.push(t, c, live.get(slug));
        ring.points[ring.slot(0)] = this.point(ring, 0);
      }
      this.options.onSample?.();
    } catch (err) {
      // Once a minute at most: a broken sampler must not flood the log.
      if (Date.now() - this.lastError > 60_000) {
        this.lastError = Date.now();
        this.options.logger.error({ err }, 'status sample failed');
      }
    } finally {
      this.sampling = false;
    }
  }

  /**
   * The `/status` document. `host` is the Host header the admin listener was reached by: when
   * the relay listens on every address, a base URL with that host name is one the reader can use.
   */
  status(host: string | undefined): { generatedAt: string; services: ServiceStatus[]; routers: RouterStatus[]; pools: PoolStatus[] } {
    const origin = this.relayOrigin(host);
    const basePath = this.options.config.basePath;
    const services: ServiceStatus[] = [];
    const limited = this.options.limits?.() ?? [];
    const now = this.options.source.now();
    for (const live of now) {
      const replicas: Record<string, number> = {};
      for (const state of LIVE_STATES) replicas[state] = 0;
      Object.assign(replicas, live.replicas);
      services.push({
        slug: live.slug,
        baseUrl: `${origin}${basePath}/${live.slug}`,
        kind: live.kind,
        state: serviceState(live),
        replicas,
        queued: live.queued,
        inflight: live.inflight,
        routing: live.routing,
        loads: live.loads,
        ejections: live.ejections,
        expectedStartMs: live.expectedStartMs,
        ...this.figures(live.slug),
        limits: limited.filter((t) => t.service === live.slug).map((t) => ({ token: t.token, ...t.use })),
      });
    }
    const config = this.options.config;
    const routers = this.options.routers?.() ?? { routers: config.routers ?? [], models: config.services };
    return { generatedAt: new Date().toISOString(), services, routers: routerStatuses(routers, now, limited, `${origin}${basePath}`), pools: this.options.pools?.() ?? [] };
  }

  /** Rolling figures of one service from its samples. */
  private figures(slug: string): Pick<ServiceStatus, 'requestsPerSecond' | 'ttfbMs' | 'lastMinute' | 'stream'> {
    const ring = this.rings.get(slug);
    if (ring === undefined || ring.count === 0) {
      const none = { p50: null, p99: null };
      return {
        requestsPerSecond: 0,
        ttfbMs: none,
        lastMinute: { requests: 0, errors: 0 },
        stream: { active: 0, eventsPerSecond: 0, firstEventMs: none, betweenEventsMs: none },
      };
    }
    const now = ring.slot(0);
    const rateFrom = ring.slot(STATUS_RATE_SAMPLES);
    const minuteFrom = ring.slot(STATUS_MINUTE_SAMPLES);
    const seconds = (ring.t[now]! - ring.t[rateFrom]!) / 1000;
    const minute = (ring.t[now]! - ring.t[minuteFrom]!) / 1000;
    return {
      requestsPerSecond: seconds > 0 ? round((ring.requests[now]! - ring.requests[rateFrom]!) / seconds, 2) : 0,
      ttfbMs: ring.ttfb.quantiles(minuteFrom, now),
      lastMinute: { requests: ring.requests[now]! - ring.requests[minuteFrom]!, errors: ring.errors[now]! - ring.errors[minuteFrom]! },
      stream: {
        active: ring.streamsActive[now]!,
        eventsPerSecond: minute > 0 ? round((ring.events[now]! - ring.events[minuteFrom]!) / minute, 2) : 0,
        firstEventMs: ring.firstEvent.quantiles(minuteFrom, now),
        betweenEventsMs: ring.betweenEvents.quantiles(minuteFrom, now),
      },
    };
  }

  /** Every kept sample of every service as chart points, oldest first. */
  history(): Record<string, ChartPoint[]> {
    const out: Record<string, ChartPoint[]> = {};
    for (const [slug, ring] of this.rings) {
      const points: ChartPoint[] = [];
      for (let back = Math.min(ring.count, STATUS_HISTORY_SAMPLES) - 1; back >= 0; back--) points.push(ring.points[ring.slot(back)]!);
      out[slug] = points;
    }
    return out;
  }

  /** The newest chart point of every service that has one. */
  latest(): Record<string, ChartPoint> {
    const out: Record<string, ChartPoint> = {};
    for (const [slug, ring] of this.rings) if (ring.count > 0) out[slug] = ring.points[ring.slot(0)]!;
    return out;
  }

  private point(ring: Ring, back: number): ChartPoint {
    const i = ring.slot(back);
    const prev = ring.slot(back + 1);
    const seconds = (ring.t[i]! - ring.t[prev]!) / 1000;
    const from = ring.slot(back + STATUS_POINT_SAMPLES);
    const ttfb = ring.ttfb.quantiles(from, i);
    const firstEvent = ring.firstEvent.quantiles(from, i);
    const betweenEvents = ring.betweenEvents.quantiles(from, i);
    return {
      t: ring.t[i]!,
      rps: seconds > 0 ? round((ring.requests[i]! - ring.requests[prev]!) / seconds, 2) : 0,
      queued: ring.queued[i]!,
      inflight: ring.inflight[i]!,
      ttfbP50: ttfb.p50,
      ttfbP99: ttfb.p99,
      errors: ring.errors[i]! - ring.errors[prev]!,
      firstEventP50: firstEvent.p50,
      firstEventP99: firstEvent.p99,
      betweenEventsP50: betweenEvents.p50,
      betweenEventsP99: betweenEvents.p99,
    };
  }

  private relayOrigin(host: string | undefined): string {
    const listen = this.options.config.listen;
    const scheme = listen.tls === undefined ? 'http' : 'https';
    let name = listen.host;
    if (name === '0.0.0.0' || name === '::' || name === '') {
      name = hostName(host) ?? (name === '::' ? '[::1]' : '127.0.0.1');
    } else if (name.includes(':')) {
      name = `[${name}]`;
    }
    return `${scheme}://${name}:${this.options.relayPort()}`;
  }
}

/** The host name of a Host header (`example.com:9091` → `example.com`, `[::1]:9091` → `[::1]`), if well-formed. */
function hostName(host: string | undefined): string | undefined {
  if (host === undefined) return undefined;
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/.exec(host);
  return m?.[1];
}

function ms(seconds: number | null): number | null {
  return seconds === null ? null : round(seconds * 1000, 2);
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
