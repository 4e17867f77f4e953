// A service's replicas in one thread: the control plane (src/control/service/service-control.ts)
// and one data plane view (src/data/replica-view.ts) calling each other directly, with no
// message in between. This is what `workers: 1` runs, and what the replica tests drive; with
// worker threads the same two halves talk through messages instead (src/gateway/worker-pool.ts).
import type { ServiceConfig } from '../config/types.js';
import type { ReplicaEvents } from '../replicas/events.js';
import type { ServiceSnapshot } from '../control/service/control-types.js';
import type { KindOptions } from '../control/service/kind-policy.js';
import { kindOf } from '../control/kinds/kinds.js';
import { ServiceControl } from '../control/service/service-control.js';
import { DEFAULT_TUNING, type ReplicaSetTuning } from '../control/service/tuning.js';
import { ReplicaView } from '../data/replica-view.js';
import type { Logger } from '../log/logger.js';
import type { ViewLink } from '../threads/link.js';
import type { Readiness, Replica, ReplicaSet, ReplicaWaiter } from '../relay/replica-set.js';
import type { ReleaseOutcome } from '../replicas/outcomes.js';


export interface ReplicaSetDeps {
  logger: Logger;
  events?: ReplicaEvents;
  tuning?: Partial<ReplicaSetTuning>;
  /** Options for the kinds of replicas (tests: Kubernetes timings and credentials). */
  kindOptions?: KindOptions | undefined;
}

/** The set as its owner (server, metrics, tests) sees it: the seam plus a read-only view. */
export interface ManagedReplicaSet extends ReplicaSet {
  snapshot(): ServiceSnapshot;
}

/** Both halves of one service in this thread (thread index 0 of its slot table). */
export class LocalReplicaSet implements ManagedReplicaSet {
  readonly slug: string;
  readonly control: ServiceControl;
  readonly view: ReplicaView;

  constructor(service: ServiceConfig, deps: ReplicaSetDeps) {
    this.slug = service.slug;
    let view: ReplicaView | undefined;
    const views = {
      get: (thread: number): ViewLink | undefined => (thread === 0 ? view : undefined),
      all: (): ViewLink[] => (view === undefined ? [] : [view]),
    };
    this.control = new ServiceControl(service, { ...deps, kind: kindOf(service), threads: 1, views });
    const tuning = { ...DEFAULT_TUNING, ...deps.tuning };
    view = new ReplicaView(service, this.control.dataView, 0, this.control, this.control.queuesForColdStart, deps.logger, tuning.poolCloseMs);
    for (const info of this.control.replicas()) view.announce(info);
    this.view = view;
  }

  acquire(waiter: ReplicaWaiter, exclude?: Replica): void {
    this.view.acquire(waiter, exclude);
  }

  expectedReadyInMs(): number {
    return this.view.expectedReadyInMs();
  }

  queuedNow(): number {
    return this.view.queuedNow();
  }

  learnState(replica: Replica, id: string): void {
    this.view.learnState(replica, id);
  }

  cancel(waiter: ReplicaWaiter): boolean {
    return this.view.cancel(waiter);
  }

  release(replica: Replica, outcome: ReleaseOutcome, keepAliveMs?: number): void {
    this.view.release(replica, outcome, keepAliveMs);
  }

  drain(): void {
    this.control.drain();
  }

  readiness(): Readiness {
    return this.view.readiness();
  }

  async close(): Promise<void> {
    await this.control.close();
    await this.view.close();
  }

  snapshot(): ServiceSnapshot {
    return this.control.snapshot();
  }
}

/** Starts the set: replicas that exist from the start are in rotation, `min` are starting. */
export function createReplicaSet(service: ServiceConfig, deps: ReplicaSetDeps): ManagedReplicaSet {
  return new LocalReplicaSet(service, deps);
}
