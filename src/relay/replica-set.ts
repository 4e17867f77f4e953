// The seam between the relay and a service's replicas (implemented by data/replica-view.ts, and
// with `workers: 1` by gateway/local-replica-set.ts). The relay asks the service's replica set
// for a replica (`acquire`), uses it, and gives it back (`release`). Whether the replica was
// ready at once, came later from the queue, or was started for this request is the set's business.
import type { RelayError } from '../http/errors.js';
import type { ReleaseOutcome } from '../replicas/outcomes.js';
import type { UpstreamPool } from '../upstream/pool.js';

/** A service as a router's model list shows it (ReplicaSet.readiness). */
export type Readiness = 'ready' | 'starting' | 'cold';

/** One replica the relay may send requests to. */
export interface Replica {
  /** Unique within the process, e.g. `demo-1`; used in logs and metrics. */
  readonly id: string;
  /** `http://127.0.0.1:9000`: scheme, host and port, no path. */
  readonly origin: string;
  /** The `Host` header value for requests to this replica (`127.0.0.1:9000`). */
  readonly host: string;
  /** The pooled keep-alive connections to this replica (src/upstream/pool.ts; made by src/data/replica-view.ts). */
  readonly pool: UpstreamPool;
  /** Requests handed out and not yet released. */
  inflight: number;
}

/**
 * A request waiting for a replica. The relay's per-request context implements it, so handing out
 * a replica costs no closure or promise. Exactly one of the two methods is called, exactly once,
 * unless `cancel` removed the waiter first.
 */
export interface ReplicaWaiter {
  /** Its place in the queue: higher goes first; equal priorities in arrival order. */
  readonly priority: number;
  /** The longest it may wait for a replica, in ms (never more than the service's `queue.maxWaitMs`);
   *  -1: the service's; 0: it does not wait (`503 no_replica` when no replica has room now). */
  readonly maxWaitMs: number;
  /** The hash of its session's affinity value (affinity-ring.ts), or -1. */
  readonly affinity: number;
  /**
   * The id of the stored state it names (a `previous_response_id`, a conversation), or undefined:
   * the replica that answered with that id is taken when it is ready and has room, before any
   * other choice (docs/api.md#stored-state-across-replicas).
   */
  readonly stateId: string | undefined;
  /** With prefix-aware routing: its prompt's chained block hashes (relay/body/prompt-blocks.ts), or undefined. */
  readonly prefix?: Int32Array | undefined;
  /** A replica, already counted in `inflight`: the waiter must `release` it exactly once. */
  onReplica(replica: Replica): void;
  /**
   * No replica will come: `queue_full`, `no_replica`, `draining` or `upstream_unavailable`.
   * The error may be an instance shared by many waiters: never modify it.
   */
  onNoReplica(error: RelayError): void;
}

export interface ReplicaSet {
  readonly slug: string;
  /**
   * Hands the waiter a ready replica now (synchronously, the hot path), or queues it until one is
   * ready (starting one if the service is cold), or fails it (`queue_full`, `draining`).
   * With `exclude` (the retry after `unreachable`), only another replica that is ready now is
   * handed out; if there is none, a launched set queues the waiter (as for a cold start) and a
   * static set fails it at once with `upstream_unavailable`.
   */
  acquire(waiter: ReplicaWaiter, exclude?: Replica): void;
  /**
   * While the service is cold and a start has been measured: the expected time left until a
   * replica is ready, in ms (0 once overdue); -1 otherwise (src/replicas/expected-start.ts).
   */
  expectedReadyInMs(): number;
  /** Requests waiting in the service's queue now, every thread's (a traced request's place: tracing/). */
  queuedNow(): number;
  /** `replica` answered with the id of state it stores (a response, a conversation): later requests naming it go there. */
  learnState(replica: Replica, id: string): void;
  /** Removes a queued waiter (its caller went away); true if it was in the queue. */
  cancel(waiter: ReplicaWaiter): boolean;
  /**
   * Gives a replica back; `unreachable` takes the replica (static or launched) out of rotation
   * until a probe succeeds. `keepAliveMs` > 0: the request asked to keep the replica loaded that
   * long after it (`X-Sluice-Keep-Alive`, bounded by the service's `replicas.keepAliveMaxMs`).
   */
  release(replica: Replica, outcome: ReleaseOutcome, keepAliveMs?: number): void;
  /** Stops taking requests: queued waiters get `503 draining`; in-flight requests go on. */
  drain(): void;
  /** Whether a replica is ready, starting, or none (a router's model list), read where this thread is. */
  readiness(): Readiness;
  /** Stops probes and replica processes and closes the connection pools. */
  close(): Promise<void>;
}
