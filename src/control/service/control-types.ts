// The control plane's types as its owners (the gateway, the worker pool, tests) see them.
import type { Logger } from '../../log/logger.js';
import type { KindOptions, ReplicaKind } from './kind-policy.js';
import type { LoadSnapshot } from './load-reader.js';
import type { ViewLink } from '../../threads/link.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { FailureReason } from '../../replicas/outcomes.js';
import type { ReplicaSetTuning } from './tuning.js';

/** The data planes, by thread index, as the control plane reaches them. */
export interface ViewRouter {
  get(thread: number): ViewLink | undefined;
  all(): Iterable<ViewLink>;
}

export interface ServiceControlDeps {
  logger: Logger;
  events?: ReplicaEvents;
  tuning?: Partial<ReplicaSetTuning>;
  /** How many data plane threads may hold requests (slot table rows). */
  threads: number;
  views: ViewRouter;
  /** The kind of the service's replicas (src/control/kinds/kinds.ts `kindOf`). */
  kind: ReplicaKind;
  /** Options for the kinds (tests: Kubernetes timings and credentials; production: the defaults). */
  kindOptions?: KindOptions | undefined;
}

export interface ReplicaSnapshot {
  id: string;
  state: ReplicaStateName;
  inflight: number;
  origin: string;
  /** The process id behind the replica, when its kind runs one (launched, once spawned). */
  pid: number | undefined;
  /** Its load reading, when the service reads loads and the replica is ready. */
  load?: LoadSnapshot;
  /** Once it has been ejected for consecutive failures (ejections.ts): whether it is now, until when, why, how often. */
  ejection?: EjectionSnapshot;
}

export interface EjectionSnapshot {
  ejected: boolean;
  /** ISO time the current ejection ends, or null. */
  until: string | null;
  /** Why it was last ejected. */
  reason: FailureReason | null;
  /** Ejections so far. */
  ejections: number;
}

/** How the service chooses among its ready replicas. */
export interface RoutingSnapshot {
  /** `fewest-in-flight`, or `queue-aware` with `replicas.load`. */
  policy: 'fewest-in-flight' | 'queue-aware';
  /** `routing.affinityHeader` (lower case), or null. */
  affinityHeader: string | null;
}

export interface ServiceSnapshot {
  slug: string;
  /** The kind of its replicas: `static`, `launched`, `kubernetes`. */
  kind: string;
  accepting: boolean;
  queued: number;
  routing: RoutingSnapshot;
  /** The median of the recent start durations (start-estimate.ts), or null before any was measured. */
  expectedStartMs: number | null;
  /** Every replica that holds a place (not yet stopped, or its process not yet exited). */
  replicas: ReplicaSnapshot[];
}
