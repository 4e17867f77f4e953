// prom-client collectors over the request counter stores: at a scrape they sum the stores (one
// per thread) and hand prom-client the samples to render, so no request ever calls prom-client.
//
// prom-client's Registry renders any registered object with a `name` and an async `get()`
// returning `{ name, help, type, values, aggregator }` (what its own Counter and Histogram
// return); these objects are that, over the typed arrays.
import type { Metric, Registry } from 'prom-client';
import { type CounterLayout, type CounterTotals, LATENCY_BUCKETS, type RequestCounters, sumCounters } from './request-counters.js';

interface Sample {
  value: number;
  labels: Record<string, string>;
  metricName?: string;
}

type CollectorType = 'counter' | 'gauge' | 'histogram';

/** One metric family whose samples are computed from the totals at each scrape. */
class Collector {
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: CollectorType,
    private readonly totals: () => CounterTotals,
    private readonly samples: (totals: CounterTotals, name: string) => Sample[],
  ) {}

  get(): Promise<{ name: string; help: string; type: CollectorType; aggregator: string; values: Sample[] }> {
    const values = this.samples(this.totals(), this.name);
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** prom-client's metrics have it; nothing to reset here (counters only grow). */
  reset(): void {}
}

const BUCKET_LABELS = [...LATENCY_BUCKETS.map(String), '+Inf'];

function histogramSamples(which: 'ttfb' | 'duration') {
  return (totals: CounterTotals, name: string): Sample[] => {
    const samples: Sample[] = [];
    for (const service of totals.services) {
      const slots = service[which];
      let cumulative = 0;
      for (let i = 0; i < BUCKET_LABELS.length; i++) {
        cumulative += slots[i]!;
        samples.push({ metricName: `${name}_bucket`, labels: { le: BUCKET_LABELS[i]!, service: service.slug }, value: cumulative });
      }
      samples.push({ metricName: `${name}_sum`, labels: { service: service.slug }, value: slots[BUCKET_LABELS.length]! });
      samples.push({ metricName: `${name}_count`, labels: { service: service.slug }, value: cumulative });
    }
    return samples;
  };
}

/**
 * Registers the per-request metrics on `registry`, reading `stores()` at every scrape: the
 * calling thread's store and, with worker threads, every worker's.
 */
export function registerRequestCollectors(registry: Registry, layout: CounterLayout, stores: () => readonly RequestCounters[]): void {
  // One sum per scrape: prom-client calls every collector's get() in the same turn, so the sum
  // is kept until the next microtask.
  let cached: CounterTotals | undefined;
  const totals = (): CounterTotals => {
    if (cached === undefined) {
      cached = sumCounters(layout, stores());
      queueMicrotask(() => {
        cached = undefined;
      });
    }
    return cached;
  };
  const collectors = [
    new Collector('sluice_requests_total', 'Relay requests by service, answered status and outcome.', 'counter', totals, (t, name) => {
      const samples: Sample[] = [];
      for (const service of t.services) {
        for (const pair of service.requests.values()) {
          samples.push({ metricName: name, labels: { service: service.slug, status: pair.status, outcome: pair.outcome }, value: pair.count });
        }
      }
      return samples;
    }),
    new Collector(
      'sluice_time_to_first_byte_seconds',
      'From the request arriving to the first byte of the answer written to the caller.',
      'histogram',
      totals,
      histogramSamples('ttfb'),
    ),
    new Collector(
      'sluice_request_duration_seconds',
      'From the request arriving to its answer being complete (or abandoned).',
      'histogram',
      totals,
      histogramSamples('duration'),
    ),
    new Collector('sluice_bytes_relayed_total', 'Body bytes relayed: in = caller to replica, out = replica to caller.', 'counter', totals, (t) =>
      t.services.flatMap((service) => [
        { labels: { service: service.slug, direction: 'in' }, value: service.bytesIn },
        { labels: { service: service.slug, direction: 'out' }, value: service.bytesOut },
      ]),
    ),
    new Collector('sluice_inflight_requests', 'Relay requests being served (queued or streaming).', 'gauge', totals, (t) => [{ labels: {}, value: t.inflight }]),
  ];
  for (const collector of collectors) registry.registerMetric(collector as unknown as Metric);
}
