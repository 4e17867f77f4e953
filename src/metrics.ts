// Prometheus metrics (contract section 9): requests by service and status, time to first byte,
// queue depth and wait, replica states and cold-start durations, bytes relayed.
// Labelled children are looked up once and cached, so a finished request costs a few increments.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueOutcome, ReplicaEvents } from './control/replicas/events.js';
import type { ReplicaStateName } from './control/replicas/replica.js';

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const COLD_START_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

/** What the relay reports when a request is over. */
export interface FinishedRequest {
  slug: string;
  status: number;
  outcome: string;
  bytesIn: number;
  bytesOut: number;
  /** Seconds from arrival to the first byte written to the caller; negative if none was. */
  ttfbSeconds: number;
  durationSeconds: number;
}

interface ServiceChildren {
  /** By `status * 64 + outcome index`. */
  requests: Map<number, Counter.Internal>;
  ttfb: Histogram.Internal<'service'>;
  duration: Histogram.Internal<'service'>;
  bytesIn: Counter.Internal;
  bytesOut: Counter.Internal;
}

const OUTCOMES = new Map<string, number>();

/** A small number per outcome name, for the cache key of the requests counter. */
function outcomeIndex(outcome: string): number {
  let index = OUTCOMES.get(outcome);
  if (index === undefined) {
    index = OUTCOMES.size;
    OUTCOMES.set(outcome, index);
  }
  return index;
}

export class Metrics implements ReplicaEvents {
  readonly registry = new Registry();
  private readonly requests: Counter<'service' | 'status' | 'outcome'>;
  private readonly ttfb: Histogram<'service'>;
  private readonly duration: Histogram<'service'>;
  private readonly bytes: Counter<'service' | 'direction'>;
  private readonly queueDepthGauge: Gauge<'service'>;
  private readonly queueWaitHistogram: Histogram<'service' | 'outcome'>;
  private readonly replicaStates: Gauge<'service' | 'state'>;
  private readonly coldStartHistogram: Histogram<'service' | 'result'>;
  private readonly inflight: Gauge;
  private readonly services = new Map<string, ServiceChildren>();

  constructor() {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'sluice_requests_total',
      help: 'Relay requests by service, answered status and outcome.',
      labelNames: ['service', 'status', 'outcome'],
      registers,
    });
    this.ttfb = new Histogram({
      name: 'sluice_time_to_first_byte_seconds',
      help: 'From the request arriving to the first byte of the answer written to the caller.',
      labelNames: ['service'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.duration = new Histogram({
      name: 'sluice_request_duration_seconds',
      help: 'From the request arriving to its answer being complete (or abandoned).',
      labelNames: ['service'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.bytes = new Counter({
      name: 'sluice_bytes_relayed_total',
      help: 'Body bytes relayed: in = caller to replica, out = replica to caller.',
      labelNames: ['service', 'direction'],
      registers,
    });
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
    this.inflight = new Gauge({
      name: 'sluice_inflight_requests',
      help: 'Relay requests being served (queued or streaming).',
      registers,
    });
  }

  requestStarted(): void {
    this.inflight.inc();
  }

  requestFinished(r: FinishedRequest): void {
    this.inflight.dec();
    const service = this.service(r.slug);
    let child = service.requests.get(r.status * 64 + outcomeIndex(r.outcome));
    if (child === undefined) {
      child = this.requests.labels(r.slug, String(r.status), r.outcome);
      service.requests.set(r.status * 64 + outcomeIndex(r.outcome), child);
    }
    child.inc();
    if (r.ttfbSeconds >= 0) service.ttfb.observe(r.ttfbSeconds);
    service.duration.observe(r.durationSeconds);
    if (r.bytesIn > 0) service.bytesIn.inc(r.bytesIn);
    if (r.bytesOut > 0) service.bytesOut.inc(r.bytesOut);
  }

  /** The labelled children of one service, looked up once. */
  private service(slug: string): ServiceChildren {
    let children = this.services.get(slug);
    if (children === undefined) {
      children = {
        requests: new Map(),
        ttfb: this.ttfb.labels(slug),
        duration: this.duration.labels(slug),
        bytesIn: this.bytes.labels(slug, 'in'),
        bytesOut: this.bytes.labels(slug, 'out'),
      };
      this.services.set(slug, children);
    }
    return children;
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

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
