// Prometheus metrics: requests by service and status, time to first byte,
// queue depth and wait, replica states and cold-start durations, bytes relayed.
// Per request: counts in typed arrays (request-counters.ts), rendered by collectors at a scrape
// (collectors.ts). Replica events (a few per replica start, not per request) stay prom-client
// metrics.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueOutcome, ReplicaEvents } from '../replicas/events.js';
import type { ReplicaStateName } from '../replicas/states.js';
import type { FailureReason } from '../replicas/outcomes.js';
import { registerRequestCollectors } from './collectors.js';
import { CounterLayout, RequestCounters, sameLayout } from './request-counters.js';

const EJECTION_REASONS: readonly FailureReason[] = ['refused', 'reset', 'timeout'];

const COLD_START_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

export class Metrics implements ReplicaEvents {
  readonly registry = new Registry();
  readonly layout: CounterLayout;
  /** This thread's counters: what `requestStarted` and `requestFinished` count into. */
  readonly counters: RequestCounters;
  /** Every store the scrape sums: this thread's, then those added with `addCounters`. */
  private readonly stores: RequestCounters[];
  private readonly queueDepthGauge: Gauge<'service' | 'priority'>;
  private readonly replicaWaitingGauge: Gauge<'service' | 'replica'>;
  private readonly replicaCacheGauge: Gauge<'service' | 'replica'>;
  private readonly queueWaitHistogram: Histogram<'service' | 'outcome'>;
  private readonly replicaStates: Gauge<'service' | 'state'>;
  private readonly coldStartHistogram: Histogram<'service' | 'result'>;
  private readonly ejectionCounter: Counter<'service' | 'reason'>;
  /** The labelled children of the queue metrics, looked up once: a cold start hands hundreds of
   *  queued requests to a replica in one loop, and prom-client's `labels()` costs a few µs each. */
  private readonly queueDepthChildren = new Map<string, ReturnType<Gauge<'service' | 'priority'>['labels']>>();
  private readonly queueWaitChildren = new Map<string, ReturnType<Histogram<'service' | 'outcome'>['labels']>>();

  /**
   * `slugs`: every service the gateway serves (requests of other slugs are not counted);
   * `routers`: the blocks for routers' token usage (token-usage.ts: `routerUsageBlocks`).
   * `buffer`: where this thread counts (`layout.byteLength` bytes, e.g. a SharedArrayBuffer the
   * main thread also reads); a new ArrayBuffer if not given.
   */
  constructor(slugs: readonly string[], routers = 0, buffer?: ArrayBuffer | SharedArrayBuffer) {
    this.layout = new CounterLayout(slugs, routers);
    this.counters = new RequestCounters(this.layout, buffer);
    this.stores = [this.counters];
    const registers = [this.registry];
    registerRequestCollectors(this.registry, this.layout, () => this.stores);
    this.queueDepthGauge = new Gauge({
      name: 'sluice_queue_depth',
      help: 'Requests waiting for a replica, by priority.',
      labelNames: ['service', 'priority'],
      registers,
    });
    this.replicaWaitingGauge = new Gauge({
      name: 'sluice_replica_waiting',
      help: "Requests waiting in the replica's own queue at its last load reading (replicas.load).",
      labelNames: ['service', 'replica'],
      registers,
    });
    this.replicaCacheGauge = new Gauge({
      name: 'sluice_replica_cache_usage',
      help: "The replica's cache usage (0 to 1) at its last load reading (replicas.load).",
      labelNames: ['service', 'replica'],
      registers,
    });
    this.queueWaitHistogram = new Histogram({
      name: 'sluice_queue_wait_seconds',
      help: 'Time requests spent waiting for a replica, by how they left the queue (granted, expired, failed, cancelled, draining).',
      labelNames: ['service', 'outcome'],
      buckets: COLD_START_BUCKETS,
      registers,
    });
    this.replicaStates = new Gauge({
      name: 'sluice_replicas',
      help: 'Replicas by service and state.',
      labelNames: ['service', 'state'],
      registers,
    });
    this.coldStartHistogram = new Histogram({
      name: 'sluice_replica_start_seconds',
      help: 'From a replica being started to it being ready (result=ready) or failing (result=failed).',
      labelNames: ['service', 'result'],
      buckets: COLD_START_BUCKETS,
      registers,
    });
    this.ejectionCounter = new Counter({
      name: 'sluice_replica_ejections_total',
      help: 'Replicas ejected from rotation for consecutive failures before a status line, by reason (refused, reset, timeout).',
      labelNames: ['service', 'reason'],
      registers,
    });
    // Every series from the start, at 0: an alert on its increase sees the first ejection.
    for (const slug of slugs) for (const reason of EJECTION_REASONS) this.ejectionCounter.labels(slug, reason).inc(0);
  }

  /**
   * Adds another thread's store (over a SharedArrayBuffer of `layout.byteLength` bytes that the
   * thread counts into with its own `RequestCounters`): scrapes then sum it too.
   */
  addCounters(store: RequestCounters): void {
    if (!sameLayout(store.layout, this.layout)) throw new Error('a counter store of another layout (other services)');
    this.stores.push(store);
  }

  /**
   * sluice_rate_limited_total{service,token,limit}: read at each scrape from `rows` (the limit
   * table's refusal counts of every limited token, limits/limit-cells.ts), so counting a refusal
   * costs the request path one atomic add and no message.
   */
  rateLimited(rows: () => readonly { service: string; token: string; limit: string; value: number }[]): void {
    new Counter({
      name: 'sluice_rate_limited_total',
      help: 'Requests refused with 429 rate_limited, by service, token name and limit (requestsPerMinute, concurrent, tokensPerMinute, tokensPerDay, tokensPerMonth).',
      labelNames: ['service', 'token', 'limit'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const row of rows()) this.labels(row.service, row.token, row.limit).inc(row.value);
      },
    });
  }

  /** sluice_limit_store_errors_total: the shared limit store's failures, read at each scrape (limits/store/limit-store.ts). */
  limitStoreErrors(read: () => number): void {
    new Counter({
      name: 'sluice_limit_store_errors_total',
      help: 'Failures of the shared store of the limits per caller (limits.store): failed or unanswered commands, lost connections, refused credentials.',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  /**
   * Prefix-aware routing's expected prompt-cache hits, read at each scrape from the services'
   * indexes (replicas/prefix-index.ts): sluice_prefix_blocks_total{service,kind="sent"|"matched"}
   * (whole prompt blocks sent, and those the chosen replica had been sent before) and
   * sluice_replica_prefix_hit_ratio{service,replica} (matched / sent since the replica got its place).
   */
  prefixRouting(rows: () => readonly { service: string; replica: string | null; hits: { blocks: number; matched: number } }[]): void {
    const registers = [this.registry];
    new Counter({
      name: 'sluice_prefix_blocks_total',
      help: 'Prefix-aware routing: whole prompt blocks sent (kind=sent), and those the chosen replica had been sent before (kind=matched: expected prompt-cache hits).',
      labelNames: ['service', 'kind'],
      registers,
      collect() {
        this.reset();
        for (const row of rows()) {
          if (row.replica !== null) continue;
          this.labels(row.service, 'sent').inc(row.hits.blocks);
          this.labels(row.service, 'matched').inc(row.hits.matched);
        }
      },
    });
    new Gauge({
      name: 'sluice_replica_prefix_hit_ratio',
      help: "Prefix-aware routing: of the prompt blocks sent to the replica since it got its place, the share it had been sent before (its expected prompt-cache hit rate).",
      labelNames: ['service', 'replica'],
      registers,
      collect() {
        this.reset();
        for (const row of rows()) if (row.replica !== null && row.hits.blocks > 0) this.labels(row.service, row.replica).set(row.hits.matched / row.hits.blocks);
      },
    });
  }

  requestStarted(): void {
    this.counters.started();
  }

  /** A finished request. `ttfbSeconds` is negative if no byte reached the caller. */
  requestFinished(slug: string, status: number, outcome: string, bytesIn: number, bytesOut: number, ttfbSeconds: number, durationSeconds: number): void {
    this.counters.finished(slug, status, outcome, bytesIn, bytesOut, ttfbSeconds, durationSeconds);
  }

  // ── ReplicaEvents: the replica sets report here ───────────────────────────────────────────

  queueDepth(service: string, _depth: number, priority: number, atPriority: number, keep: boolean): void {
    const key = `${priority} ${service}`;
    if (atPriority === 0 && !keep) {
      // A priority no token has (a caller lowered its own): its series goes once none waits.
      if (this.queueDepthChildren.delete(key)) this.queueDepthGauge.remove(service, String(priority));
      return;
    }
    let child = this.queueDepthChildren.get(key);
    if (child === undefined) {
      child = this.queueDepthGauge.labels(service, String(priority));
      this.queueDepthChildren.set(key, child);
    }
    child.set(atPriority);
  }

  replicaLoad(service: string, replica: string, reading: { waiting: number; cacheUsage: number | null } | null): void {
    if (reading === null) {
      this.replicaWaitingGauge.remove(service, replica);
      this.replicaCacheGauge.remove(service, replica);
      return;
    }
    this.replicaWaitingGauge.labels(service, replica).set(reading.waiting);
    if (reading.cacheUsage === null) this.replicaCacheGauge.remove(service, replica);
    else this.replicaCacheGauge.labels(service, replica).set(reading.cacheUsage);
  }

  queueWait(service: string, ms: number, outcome: QueueOutcome): void {
    const key = `${outcome} ${service}`;
    let child = this.queueWaitChildren.get(key);
    if (child === undefined) {
      child = this.queueWaitHistogram.labels(service, outcome);
      this.queueWaitChildren.set(key, child);
    }
    child.observe(ms / 1000);
  }

  replicaState(service: string, _replica: string, from: ReplicaStateName | null, to: ReplicaStateName, ms: number): void {
    if (from !== null) this.replicaStates.labels(service, from).dec();
    // Stopped and failed replicas are gone: the gauge counts the replicas that exist.
    if (to !== 'stopped' && to !== 'failed') this.replicaStates.labels(service, to).inc();
    if (from === 'starting' && to === 'failed') this.coldStartHistogram.labels(service, 'failed').observe(ms / 1000);
  }

  replicaEjected(service: string, _replica: string, reason: FailureReason): void {
    this.ejectionCounter.labels(service, reason).inc();
  }

  coldStart(service: string, _replica: string, ms: number): void {
    this.coldStartHistogram.labels(service, 'ready').observe(ms / 1000);
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
