// The seam between one service's state machine (ServiceControl, service-control.ts) and the kind
// of its replicas, in the manner of Envoy's cluster types: the state machine, the queue, probes,
// ejections and drain are the same for every kind; what differs is asked of the kind's policy.
// The kinds themselves live above this folder, one folder each (src/control/kinds/: static,
// launched, kubernetes), and the gateway hands the service's kind to ServiceControl, so nothing
// here names a kind. Adding one: docs/architecture.md#adding-a-replica-kind.
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import type { SlotControl } from '../../replicas/slot-control.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { Endpoint } from '../sources/source.js';
import type { UnitPool } from '../pools/unit-pool.js';
import type { Health } from './health.js';
import type { ManagedReplica } from './replica.js';
import type { ReplicaSetTuning } from './tuning.js';

/**
 * One kind of replicas, as the gateway registers it (src/control/kinds/kinds.ts): how to recognise
 * a service of this kind, how many slots its shared table needs, and the policy that runs it.
 */
export interface ReplicaKind {
  /** Its name on /status and in the snapshot (`static`, `launched`, `kubernetes`). */
  readonly name: string;
  /** True when `service` is of this kind (its key of `replicas` is set). */
  configured(service: ServiceConfig): boolean;
  /** Slots in the service's shared table: every replica that may hold a place at once, plus
   *  room for replicas gone whose last requests are still ending. */
  slotCapacity(service: ServiceConfig): number;
  /**
   * Loads what the kind's policies need and the gateway does not load otherwise (the Kubernetes
   * client: about 28 MB of heap a gateway without Kubernetes services should not carry). The
   * gateway awaits it, for each kind its services use, before it builds any policy.
   */
  load?(): Promise<void>;
  /** The policy of one service; may throw (a failed start: no Kubernetes credentials). */
  policy(service: ServiceConfig, host: ReplicaHost): ReplicaKindPolicy;
}

/**
 * What one kind of replicas decides for a service. ServiceControl asks it and never names a kind;
 * the answers that the data plane needs (`queuesForColdStart`) travel to every thread with the
 * slot table. A policy changes replicas only through its host (create, place, transition, forget):
 * the state machine stays the one writer of states, slots and counts.
 */
export interface ReplicaKindPolicy {
  /**
   * A service with no replica ready queues its requests (up to `queue.maxWaitMs`) while replicas
   * are started on demand, and a retry after a refused connection queues too. False: requests
   * find a replica now or get their answer at once (static replicas run elsewhere; nothing would
   * start one).
   */
  readonly queuesForColdStart: boolean;
  /** A ready replica is probed every `probeIntervalMs` (with `readyPath`): nothing else would tell
   *  that it stopped answering (a launched replica's exit does; a pod's endpoint conditions do). */
  readonly probesWhenReady: boolean;
  /** With every replica out of rotation, the one taken out longest ago is still handed out (the
   *  "panic" rule of Envoy): only where no other replica could come. */
  readonly panicFallback: boolean;

  /** The service is built: place the replicas that exist from the start, begin watching. */
  start(): void;
  /** The queue or the replicas changed: start replicas, or report the demand to who does. */
  demandChanged(): void;
  /**
   * `r` has just moved `from` → `to` (states, slot and counts are written, the old state's probe
   * timer cleared). What entering `to` means for this kind: end its own timers of `from`, arm an
   * idle stop, stop a process, report a cold start, or move on (`draining` → `stopped`) through
   * the host. ServiceControl hands out the queue after `ready` and handles the backoff and the
   * waiters after `failed`; a `failed` or `stopped` replica must reach `host.forget` once whatever
   * ran it is gone (ServiceControl forgets a `stopped` one itself).
   */
  entered(r: ManagedReplica, from: ReplicaStateName, to: ReplicaStateName, now: number): void;
  /** True while the source holds `r` out of rotation: the recovery probe must not bring it back. */
  heldOut(r: ManagedReplica): boolean;
  /**
   * When the start in progress of a cold service was asked for (performance.now()), or -1 (none):
   * the expected start counts from it (start-estimate.ts). Without it, the earliest creation of a
   * replica still `starting`.
   */
  startAskedAt?(): number;
  /**
   * Stops the idle replicas now (the admin `unload`): each ready one with nothing in flight that
   * `min` does not need, through the slot table's compare-exchange (a request taken meanwhile
   * keeps it). Those stopped and those kept (requests in flight, or `min`), by id. Absent: the
   * kind does not stop replicas on demand (static: they run elsewhere; Kubernetes: its idle
   * scale-down alone).
   */
  unloadIdle?(): { stopped: string[]; kept: string[] };
  /** The process id behind `r`, for /status and the state log (undefined: none, or not ours). */
  pid(r: ManagedReplica): number | undefined;
  /** The service drains: start nothing more. */
  drain(): void;
  /** The service closes (every live replica already `draining`): stop what runs, await it. */
  close(graceMs: number): Promise<void>;
}

/** What a policy may ask of its service: the state machine's operations and its counts. */
export interface ReplicaHost {
  readonly service: ServiceConfig;
  readonly slots: SlotControl;
  readonly log: Logger;
  readonly events: ReplicaEvents | undefined;
  readonly tuning: ReplicaSetTuning;
  /** The probes (readiness polls, periodic and recovery probes). */
  readonly health: Health;
  /** Options the gateway's owner set for the kind (tests: Kubernetes timings and credentials). */
  readonly options: KindOptions;
  /** False once the service drains. */
  readonly accepting: boolean;
  /** Requests that want a replica: the queued ones, plus one that would not wait on a cold service. */
  readonly demanded: number;
  readonly readyReplicas: number;
  /** An idle replica may be stopped: more than `min` are live and nobody is queued. */
  readonly canStopIdle: boolean;
  /** Replicas holding a place, starting, and live (starting, ready or unreachable); `queued` is `demanded`. */
  counts(): { places: number; starting: number; live: number; queued: number };
  /** How long the next start must still wait for the backoff of failed ones (0: now). */
  backoffWaitMs(): number;
  /** The queued request that goes first, its priority and arrival (`sharedClock()`), or a wake in force (priority 0); undefined: none. */
  firstWaiting(): { priority: number; arrivedAt: number } | undefined;
  /** A new replica in `starting` with a slot of its own; undefined when no slot is free. */
  create(): ManagedReplica | undefined;
  /** The replica has an address: every data plane learns it (before it can be ready). */
  place(r: ManagedReplica, endpoint: Endpoint): void;
  transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean;
  /** Lets go of a terminal replica whose process is gone: frees its place and its slot. */
  forget(r: ManagedReplica): void;
  /** A start took `ms`, from being asked for to the replica being ready (start-estimate.ts). */
  startMeasured(ms: number): void;
}

/**
 * Options for the kinds, by kind, as the gateway's owner passes them (production: the pools only).
 * A kind that takes options adds its key to this interface from its own folder (`declare module`:
 * kinds/kubernetes/kubernetes-kind.ts), so this seam names no kind.
 */
export interface KindOptions {
  /** The gateway's pools of units, by name, that launched replicas take from (`replicas.pool`). */
  pools?: ReadonlyMap<string, UnitPool> | undefined;
}
