// The one place the service overview reads the gateway's state: the services' snapshots for
// what is true now, and the Prometheus counters the relay already keeps for what happened.
// Nothing here runs per request: `now()` runs per /status call, `counters()` once a second.
// With worker threads the snapshots are the control plane's (ServiceControl) and the counters are
// the collectors' sums over every thread's store; only this file knows where they come from.
import type { Metrics } from '../metrics/metrics.js';
import { LATENCY_BUCKETS, STREAM_BUCKETS } from '../metrics/request-counters.js';

/**
 * A service as the control plane reports it (ServiceControl.snapshot, control/service/control-types.ts
 * narrows it): the one declaration of its status shape, which the overview reads.
 */
export interface ServiceSnapshotShape {
  slug: string;
  /** The kind of its replicas: `static`, `launched`, `kubernetes`. */
  kind: string;
  accepting: boolean;
  queued: number;
  routing: RoutingStatus;
  /** The median of the service's recent start durations (start-estimate.ts), or null before any was measured. */
  expectedStartMs: number | null;
  /** Every replica that holds a place (not yet stopped, or its process not yet exited). */
  replicas: ReadonlyArray<{ id: string; state: string; inflight: number; load?: ReplicaLoad; ejection?: ReplicaEjection }>;
}

/** What the overview needs of a service's replicas: the replica set's (or control plane's) read-only view. */
export interface SnapshotSource {
  snapshot(): ServiceSnapshotShape;
}

/** How a service chooses among its ready replicas. */
export interface RoutingStatus {
  /** `fewest-in-flight`, or `queue-aware` with `replicas.load`. */
  policy: 'fewest-in-flight' | 'queue-aware';
  /** `routing.affinityHeader` (lower case), or null. */
  affinityHeader: string | null;
  /** Prefix-aware routing (`routing.prefix`): its blocks and the prompt-cache hits it expected, or null: off. */
  prefix: PrefixStatus | null;
}

/**
 * The prompt-cache hits prefix-aware routing expected: of the whole blocks of the prompts it sent,
 * the leading ones the chosen replica had been sent before (and still remembered).
 */
export interface PrefixHits {
  requests: number;
  blocks: number;
  matched: number;
  /** matched / blocks (null before any block). */
  hitRate: number | null;
}

interface PrefixStatus extends PrefixHits {
  blockBytes: number;
  maxBlocks: number;
  indexSize: number;
  /** Per replica in a slot now, since it got its slot. */
  replicas: (PrefixHits & { replica: string })[];
}

/** A ready replica's last load reading (`replicas.load`). */
export interface ReplicaLoad {
  /** The last valid reading's waiting requests (null: none yet). */
  waiting: number | null;
  /** Its cache usage (null: not read, or not exported). */
  cacheUsage: number | null;
  /** The requests the server was running at that reading, summed over series (a preset's running gauge; null: not read, or not exported). */
  running: number | null;
  /** How old that reading is, in ms (null: none yet). */
  ageMs: number | null;
  /** True while the reading is valid and weighs in the choice; false: the replica is weighed by in flight. */
  used: boolean;
  /** Why it is not used (the failure, or `stale`), if it is not. */
  problem: string | null;
}

/** The same, with the replica it is of (/status). */
export interface ReplicaLoadStatus extends ReplicaLoad {
  replica: string;
}

/** A replica ejected now or before for consecutive failures (docs/operations.md#ejected-replicas). */
export interface ReplicaEjection {
  ejected: boolean;
  /** ISO time its current ejection ends, or null. */
  until: string | null;
  /** Why it was last ejected. */
  reason: string | null;
  /** Ejections so far. */
  ejections: number;
}

/** The same, with the replica it is of (/status). */
export interface ReplicaEjectionStatus extends ReplicaEjection {
  replica: string;
}

/** What is true of a service now. */
export interface LiveService {
  slug: string;
  kind: string;
  /** False once the set stopped taking requests (the gateway is draining). */
  accepting: boolean;
  /** Replicas that hold a slot, by state. */
  replicas: Record<string, number>;
  queued: number;
  /** Requests handed to a replica and not yet finished. */
  inflight: number;
  routing: RoutingStatus;
  /** The load reading of each replica that has one, in the order of the replicas. */
  loads: ReplicaLoadStatus[];
  /** Each replica that has been ejected, in the order of the replicas. */
  ejections: ReplicaEjectionStatus[];
  /** The median of the recent start durations in ms, or null before any was measured. */
  expectedStartMs: number | null;
}

/** Cumulative counts since the gateway started; the board takes differences. */
export interface ServiceCounters {
  /** Relayed requests, every status. */
  requests: number;
  /** Of those, answered with a 5xx status (the replica's, or Sluice's own 502, 503, 504). */
  errors: number;
  /** Time to first byte: cumulative count per bucket upper bound (`ttfbBounds`, then +Inf). */
  ttfb: number[];
  /** Events of streamed answers relayed. */
  events: number;
  /** Streamed answers being relayed at the reading (a gauge, not cumulative). */
  streamsActive: number;
  /** Time to first event and time between events: cumulative counts per bucket (`streamBounds`, then +Inf). */
  firstEvent: number[];
  betweenEvents: number[];
}

export interface StatusSource {
  /** Upper bounds (seconds) of the time-to-first-byte buckets, without +Inf. */
  readonly ttfbBounds: readonly number[];
  /** Upper bounds (seconds) of the stream histograms' buckets, without +Inf. */
  readonly streamBounds: readonly number[];
  now(): LiveService[];
  counters(): Promise<Map<string, ServiceCounters>>;
}

const REQUESTS = 'sluice_requests_total';
const TTFB = 'sluice_time_to_first_byte_seconds';
const EVENTS = 'sluice_stream_events_total';
const ACTIVE = 'sluice_streams_active';
const FIRST_EVENT = 'sluice_time_to_first_event_seconds';
const BETWEEN_EVENTS = 'sluice_time_between_events_seconds';

type Sample = { metricName?: string; labels: Record<string, string | number>; value: number };

/** `services` in config order. */
export function createStatusSource(services: readonly SnapshotSource[], metrics: Metrics): StatusSource {
  const metric = (name: string) => {
    const found = metrics.registry.getSingleMetric(name);
    if (found === undefined) throw new Error(`metric ${name} must be registered`);
    return found;
  };
  const ttfbMetric = metric(TTFB);
  const requestsMetric = metric(REQUESTS);
  const eventsMetric = metric(EVENTS);
  const activeMetric = metric(ACTIVE);
  const firstEventMetric = metric(FIRST_EVENT);
  const betweenEventsMetric = metric(BETWEEN_EVENTS);
  const ttfbBounds = LATENCY_BUCKETS;
  const streamBounds = STREAM_BUCKETS;

  /** Copies the cumulative buckets of histogram `name` into `into(slug)`, service by service. */
  const buckets = (samples: readonly Sample[], name: string, bounds: readonly number[], into: (slug: string) => number[]): void => {
    for (const v of samples) {
      if (v.metricName !== `${name}_bucket`) continue;
      const le = v.labels['le'];
      const i = le === '+Inf' ? bounds.length : bounds.indexOf(Number(le));
      if (i >= 0) into(String(v.labels['service']))[i] = v.value;
    }
  };

  return {
    ttfbBounds,
    streamBounds,
    now() {
      const out: LiveService[] = [];
      for (const service of services) {
        const snap = service.snapshot();
        const byState: Record<string, number> = {};
        const loads: ReplicaLoadStatus[] = [];
        const ejections: ReplicaEjectionStatus[] = [];
        let inflight = 0;
        for (const r of snap.replicas) {
          byState[r.state] = (byState[r.state] ?? 0) + 1;
          inflight += r.inflight;
          if (r.load !== undefined) loads.push({ replica: r.id, ...r.load });
          if (r.ejection !== undefined) ejections.push({ replica: r.id, ...r.ejection });
        }
        out.push({ slug: snap.slug, kind: snap.kind, accepting: snap.accepting, replicas: byState, queued: snap.queued, inflight, routing: snap.routing, loads, ejections, expectedStartMs: snap.expectedStartMs });
      }
      return out;
    },
    async counters() {
      const out = new Map<string, ServiceCounters>();
      const entry = (slug: string): ServiceCounters => {
        let c = out.get(slug);
        if (c === undefined) {
          c = {
            requests: 0,
            errors: 0,
            ttfb: new Array<number>(ttfbBounds.length + 1).fill(0),
            events: 0,
            streamsActive: 0,
            firstEvent: new Array<number>(streamBounds.length + 1).fill(0),
            betweenEvents: new Array<number>(streamBounds.length + 1).fill(0),
          };
          out.set(slug, c);
        }
        return c;
      };
      for (const service of services) entry(service.snapshot().slug);
      // Asked in one turn: the collectors sum the counter stores once for all of them.
      const [requests, ttfb, firstEvent, betweenEvents, events, active] = await Promise.all(
        [requestsMetric, ttfbMetric, firstEventMetric, betweenEventsMetric, eventsMetric, activeMetric].map(async (m) => (await m.get()).values as Sample[]),
      );
      for (const v of requests!) {
        const c = entry(String(v.labels['service']));
        c.requests += v.value;
        if (Number(v.labels['status']) >= 500) c.errors += v.value;
      }
      buckets(ttfb!, TTFB, ttfbBounds, (slug) => entry(slug).ttfb);
      buckets(firstEvent!, FIRST_EVENT, streamBounds, (slug) => entry(slug).firstEvent);
      buckets(betweenEvents!, BETWEEN_EVENTS, streamBounds, (slug) => entry(slug).betweenEvents);
      for (const v of events!) entry(String(v.labels['service'])).events = v.value;
      for (const v of active!) entry(String(v.labels['service'])).streamsActive = v.value;
      return out;
    },
  };
}
