// What the control plane reports about replicas and the queue, for metrics. Every method is called
// synchronously, after the change, and must not throw or call back into the control plane.
import type { ReplicaStateName } from './replica.js';

/** How a queued request left the queue. */
export type QueueOutcome = 'granted' | 'expired' | 'failed' | 'cancelled' | 'draining';

export interface ReplicaEvents {
  /** The number of queued requests changed (push, grant, expiry, cancel, failure, drain). */
  queueDepth(service: string, depth: number): void;
  /** A request left the queue after `ms`; `granted` is the queue wait of a served request. */
  queueWait(service: string, ms: number, outcome: QueueOutcome): void;
  /** A replica moved from `from` (null: just created) to `to` after `ms` in `from`. */
  replicaState(service: string, replica: string, from: ReplicaStateName | null, to: ReplicaStateName, ms: number): void;
  /** A launched replica became ready `ms` after it was created (port, spawn, load, probe). */
  coldStart(service: string, replica: string, ms: number): void;
}
