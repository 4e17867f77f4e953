// prom-client collectors over the request counter stores: at a scrape they sum the stores (one
// per thread) and hand prom-client the samples to render, so no request ever calls prom-client.
//
// prom-client's Registry renders any registered object with a `name` and an async `get()`
// returning `{ name, help, type, values, aggregator }` (what its own Counter and Histogram
// return); these objects are that, over the typed arrays.
import type { Metric, Registry } from 'prom-client';
import {
  type CounterLayout,
  type CounterTotals,
  INTERRUPTIONS,
  LATENCY_BUCKETS,
  type RequestCounters,
  STREAM_BUCKETS,
  sumCounters,
} from './request-counters.js';

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

function histogramSamples(which: 'ttfb' | 'duration' | 'firstEvent' | 'betweenEvents') {
  const labels = [...(which === 'ttfb' || which === 'duration' ? LATENCY_BUCKETS : STREAM_BUCKETS).map(String), '+Inf'];
  return (totals: CounterTotals, name: string): Sample[] => {
    const samples: Sample[] = [];
    for (const service of totals.services) {
      const slots = service[which];
      let cumulative = 0;
      for (let i = 0; i < labels.length; i++) {
        cumulative += slots[i]!;
        samples.push({ metricName: `${name}_bucket`, labels: { le: labels[i]!, service: service.slug }, value: cumulative });
      }
      samples.push({ metricName: `${name}_sum`, labels: { service: service.slug }, value: slots[labels.length]! });
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
    new Collector('sluice_trace_spans_exported_total', 'Spans of traced requests the collector accepted (docs/operations.md#traces).', 'counter', totals, (t) => [{ labels: {}, value: t.spans[0] }]),
    new Collector(
      'sluice_trace_spans_dropped_total',
      'Spans of traced requests lost: the export queue was full (the collector slow or down), or an export failed (refused, an error status, unreachable, past its timeout).',
      'counter',
      totals,
      (t) => [
        { labels: { reason: 'queue_full' }, value: t.spans[1] },
        { labels: { reason: 'export_failed' }, value: t.spans[2] },
      ],
    ),
    new Collector('sluice_inflight_requests', 'Relay requests being served (queued or streaming).', 'gauge', totals, (t) => [{ labels: {}, value: t.inflight }]),
    new Collector('sluice_stream_events_total', 'Server-sent events relayed to callers (events with data; comments are not counted).', 'counter', totals, (t) =>
      t.services.map((service) => ({ labels: { service: service.slug }, value: service.streamEvents })),
    ),
    new Collector(
      'sluice_time_to_first_event_seconds',
      'From the request arriving to the first complete event of its streamed answer written to the caller: time to first token.',
      'histogram',
      totals,
      histogramSamples('firstEvent'),
    ),
    new Collector(
      'sluice_time_between_events_seconds',
      'The gap before each event of a streamed answer after its first (0 for events written together): inter-token latency.',
      'histogram',
      totals,
      histogramSamples('betweenEvents'),
    ),
    new Collector('sluice_streams_active', 'Streamed answers (text/event-stream) being relayed now.', 'gauge', totals, (t) =>
      t.services.map((service) => ({ labels: { service: service.slug }, value: service.streamsActive })),
    ),
    new Collector(
      'sluice_stream_interruptions_total',
      'Streamed answers cut after their status line: the replica reset or closed it, went silent past bodyIdleMs, or the gateway stopped.',
      'counter',
      totals,
      (t) => t.services.flatMap((service) => INTERRUPTIONS.map((reason, i) => ({ labels: { service: service.slug, reason }, value: service.interruptions[i]! }))),
    ),
    new Collector(
      'sluice_llm_tokens_total',
      "LLM tokens of the answers, by the caller's token: prompt and completion as the answer's usage reports them, else one completion token per event of a stream.",
      'counter',
      totals,
      // A router's tokens under the router's slug, as sluice_rate_limited_total has them.
      (t) =>
        [...t.services.map((service): [string, Map<string, [number, number]>] => [service.slug, service.llmTokens]), ...t.routers].flatMap(([slug, tokens]) =>
          [...tokens].flatMap(([token, [prompt, completion]]) => [
            { labels: { service: slug, token, kind: 'prompt' }, value: prompt },
            { labels: { service: slug, token, kind: 'completion' }, value: completion },
          ]),
        ),
    ),
  ];
  for (const collector of collectors) registry.registerMetric(collector as unknown as Metric);
}
