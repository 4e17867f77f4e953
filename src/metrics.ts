// Prometheus metrics (contract section 9): requests by service and status, time to first byte,
// queue depth and wait, replica states and cold-start durations, bytes relayed.
// Per-request counts come from the data plane threads' request stores (metrics/request-store.ts),
// summed at scrape time; replica and queue metrics come from the control plane's events.
import { Gauge, Histogram, Registry } from 'prom-client';
import { type HistogramSum, LATENCY_BUCKETS, type ServiceSums, sumStores } from './metrics/request-store.js';
import type { QueueOutcome, ReplicaEvents } from './control/replicas/events.js';
import type { ReplicaStateName } from './control/replicas/replica.js';

const COLD_START_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

/** A metric the registry renders from the request stores' sums (read at scrape time). */
interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

class SummedMetric {
  readonly aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
    private readonly values: () => MetricValue[],
  ) {}

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValue[] }> {
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() });
  }

  reset(): void {}
}

export class Metrics implements ReplicaEvents {
  readonly registry = new Registry();
  private readonly queueDepthGauge: Gauge<'service'>;
  private readonly queueWaitHistogram: Histogram<'service' | 'outcome'>;
  private readonly replicaStates: Gauge<'service' | 'state'>;
  private readonly coldStartHistogram: Histogram<'service' | 'result'>;
  /** One request store per data plane thread (request-store.ts). */
  private readonly stores: SharedArrayBuffer[] = [];
  private sums: ReturnType<typeof sumStores> | undefined;

  constructor(private readonly slugs: readonly string[]) {
    const registers = [this.registry];
    const summed = (name: string, help: string, type: 'counter' | 'gauge' | 'histogram', values: () => MetricValue[]): void => {
      this.registry.registerMetric(new SummedMetric(name, help, type, values) as unknown as Parameters<Registry['registerMetric']>[0]);
    };
    summed('sluice_requests_total', 'Relay requests by service, answered status and outcome.', 'counter', () =>
      this.perService((slug, s) =>
        [...s.requests].map(([key, value]) => {
          const [status, outcome] = key.split(' ');
          return { labels: { service: slug, status: status!, outcome: outcome! }, value };
        }),
      ),
    );
    summed('sluice_time_to_first_byte_seconds', 'From the request arriving to the first byte of the answer written to the caller.', 'histogram', () =>
      this.perService((slug, s) => histogramValues('sluice_time_to_first_byte_seconds', slug, s.ttfb)),
    );
    summed('sluice_request_duration_seconds', 'From the request arriving to its answer being complete (or abandoned).', 'histogram', () =>
      this.perService((slug, s) => histogramValues('sluice_request_duration_seconds', slug, s.duration)),
    );
    summed('sluice_bytes_relayed_total', 'Body bytes relayed: in = caller to replica, out = replica to caller.', 'counter', () =>
      this.perService((slug, s) => [
        ...(s.bytesIn > 0 ? [{ labels: { service: slug, direction: 'in' }, value: s.bytesIn }] : []),
        ...(s.bytesOut > 0 ? [{ labels: { service: slug, direction: 'out' }, value: s.bytesOut }] : []),
      ]),
    );
    this.queueDepthGauge = new Gauge({
      name: 'sluice_queue_depth',
      help: 'Requests waiting for a replica.',
      labelNames: ['service'],
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
    summed('sluice_inflight_requests', 'Relay requests being served (queued or streaming).', 'gauge', () => [
      { labels: {}, value: this.current().inflight },
    ]);
  }

  /** A new data plane thread's request store. */
  addStore(buffer: SharedArrayBuffer): void {
    this.stores.push(buffer);
  }

  /** The sums for the scrape in progress (computed once per scrape). */
  private current(): ReturnType<typeof sumStores> {
    this.sums ??= sumStores(this.stores, this.slugs.length);
    return this.sums;
  }

  private perService(fn: (slug: string, sums: ServiceSums) => MetricValue[]): MetricValue[] {
    const { services } = this.current();
    return services.flatMap((sums, i) => fn(this.slugs[i]!, sums));
  }

  // ── ReplicaEvents: the replica sets report here ───────────────────────────────────────────

  queueDepth(service: string, depth: number): void {
    this.queueDepthGauge.labels(service).set(depth);
  }

  queueWait(service: string, ms: number, outcome: QueueOutcome): void {
    this.queueWaitHistogram.labels(service, outcome).observe(ms / 1000);
  }

  replicaState(service: string, _replica: string, from: ReplicaStateName | null, to: ReplicaStateName, ms: number): void {
    if (from !== null) this.replicaStates.labels(service, from).dec();
    // Stopped and failed replicas are gone: the gauge counts the replicas that exist.
    if (to !== 'stopped' && to !== 'failed') this.replicaStates.labels(service, to).inc();
    if (from === 'starting' && to === 'failed') this.coldStartHistogram.labels(service, 'failed').observe(ms / 1000);
  }

  coldStart(service: string, _replica: string, ms: number): void {
    this.coldStartHistogram.labels(service, 'ready').observe(ms / 1000);
  }

  async render(): Promise<string> {
    this.sums = undefined;
    try {
      return await this.registry.metrics();
    } finally {
      this.sums = undefined;
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

function histogramValues(name: string, slug: string, h: HistogramSum): MetricValue[] {
  if (h.count === 0) return [];
  const values: MetricValue[] = [];
  let cumulative = 0;
  for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
    cumulative += h.buckets[i]!;
    values.push({ metricName: `${name}_bucket`, labels: { le: LATENCY_BUCKETS[i]!, service: slug }, value: cumulative });
  }
  values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', service: slug }, value: h.count });
  values.push({ metricName: `${name}_sum`, labels: { service: slug }, value: h.sum });
  values.push({ metricName: `${name}_count`, labels: { service: slug }, value: h.count });
  return values;
}
