// The control plane's types as its owners (the gateway, the worker pool, tests) see them.
import type { Logger } from '../../log/logger.js';
import type { KindOptions, ReplicaKind } from './kind-policy.js';
import type { ReplicaEjection, ReplicaLoad, ServiceSnapshotShape } from '../../admin/status-source.js';
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

/** A replica as the control plane reports it (the status shape: admin/status-source.ts). */
export interface ReplicaSnapshot {
  id: string;
  state: ReplicaStateName;
  inflight: number;
  origin: string;
  /** The process id behind the replica, when its kind runs one (launched, once spawned). */
  pid: number | undefined;
  /** Its load reading, when the service reads loads and the replica is ready. */
  load?: ReplicaLoad;
  /** Once it has been ejected for consecutive failures (ejections.ts): whether it is now, until when, why, how often. */
  ejection?: EjectionSnapshot;
}

/** An ejection as the control plane reports it: the status shape's, with the reason named. */
export interface EjectionSnapshot extends ReplicaEjection {
  reason: FailureReason | null;
}

/** A service as the control plane reports it: the status shape (admin/status-source.ts), its replicas in full. */
export interface ServiceSnapshot extends ServiceSnapshotShape {
  replicas: ReplicaSnapshot[];
}
