// What the control plane reports about replicas and the queue, for metrics. Every method is called
// synchronously, after the change, and must not throw or call back into the control plane.
import type { ReplicaStateName } from './states.js';
import type { FailureReason } from './outcomes.js';

/** How a queued request left the queue (`displaced`: a higher-priority arrival took its place). */
export type QueueOutcome = 'granted' | 'expired' | 'failed' | 'cancelled' | 'draining' | 'displaced';

export interface ReplicaEvents {
  /**
   * The number of queued requests changed (push, grant, expiry, cancel, failure, drain): `depth`
   * in all, `atPriority` of them at `priority`. `keep` is false for a priority no token of the
   * service has (a caller lowered its own): once none waits at it, its series may go.
   */
  queueDepth(service: string, depth: number, priority: number, atPriority: number, keep: boolean): void;
  /** A request left the queue after `ms`; `granted` is the queue wait of a served request. */
  queueWait(service: string, ms: number, outcome: QueueOutcome): void;
  /** A replica moved from `from` (null: just created) to `to` after `ms` in `from`. */
  replicaState(service: string, replica: string, from: ReplicaStateName | null, to: ReplicaStateName, ms: number): void;
  /** A launched replica became ready `ms` after it was created (port, spawn, load, probe). */
  coldStart(service: string, replica: string, ms: number): void;
  /**
   * A replica's load reading: its waiting requests and cache usage (null: not read), or `null`
   * when it has no valid reading any more (stale, failing, gone).
   */
  replicaLoad(service: string, replica: string, reading: { waiting: number; cacheUsage: number | null } | null): void;
  /** A replica was ejected from rotation for consecutive failures (control/service/ejections.ts). */
  replicaEjected(service: string, replica: string, reason: FailureReason): void;
}
