// One replica as the control plane manages it: the state machine (one union type, the table of
// allowed moves) and its bookkeeping. The one transition function that moves a replica, logs it
// and reacts to it is `ServiceControl.transition` in service-control.ts, because every reaction
// (hand out the queue, fail waiters, start a replacement) is the service's business. The data
// planes see a replica only as its slot in the shared table (src/replicas/slots.ts).
import type { ReplicaProcess } from '../../replicas/launchers/process.js';

/**
 * Where a replica is in its life. Only `ready` replicas are handed out (and, for a static set
 * whose every replica is `unreachable`, the one that failed longest ago: see service-control.ts).
 */
export type ReplicaStateName =
  /** Created: a launched replica's process is spawned (or its port is being chosen) and its
   *  readiness probe has not answered 2xx yet. A static replica passes through at once. */
  | 'starting'
  /** In rotation: requests are handed to it, up to `concurrency`. */
  | 'ready'
  /** Out of rotation after a refused connection (`release(r, 'unreachable')`) or a failed
   *  periodic probe; probed every few hundred ms and back to `ready` when a probe succeeds. */
  | 'unreachable'
  /** Asked to stop (idle, or the set is closing): SIGTERM sent, SIGKILL after a grace; no new
   *  requests. A draining replica still counts toward `max` until its process has exited. */
  | 'draining'
  /** Terminal: stopped on purpose and its process has exited. */
  | 'stopped'
  /** Terminal: did not become ready (exit, spawn error, start timeout) or exited on its own. */
  | 'failed';

/** The allowed moves; anything else is a bug and is refused (and logged) by the transition. */
export const TRANSITIONS: Readonly<Record<ReplicaStateName, readonly ReplicaStateName[]>> = {
  starting: ['ready', 'failed', 'draining'],
  ready: ['unreachable', 'draining', 'failed'],
  unreachable: ['ready', 'draining', 'failed'],
  draining: ['stopped'],
  stopped: [],
  failed: [],
};

export function canTransition(from: ReplicaStateName, to: ReplicaStateName): boolean {
  return TRANSITIONS[from].includes(to);
}

export function isTerminal(state: ReplicaStateName): boolean {
  return state === 'stopped' || state === 'failed';
}

/** The control plane's record of one replica. */
export class ManagedReplica {
  readonly id: string;
  /** Its place in the shared slot table, and the generation of the slot it got. */
  readonly slot: number;
  readonly gen: number;
  /** `http://127.0.0.1:PORT`; empty until a launched replica's port is chosen. */
  origin = '';
  /** `127.0.0.1:PORT`; empty until a launched replica's port is chosen. */
  host = '';

  state: ReplicaStateName = 'starting';
  /** Clock (ms, `performance.now()`) when the current state was entered. */
  since: number;
  readonly createdAt: number;
  /** Clock when it was last taken out of rotation; the static fallback picks the oldest. */
  failedAt = 0;
  /** Host name and port for the TCP probe (static replicas without `readyPath`). */
  probeHost = '';
  probePort = 0;

  /** The child process of a launched replica, once spawned. */
  process: ReplicaProcess | undefined = undefined;
  /** The last probe result, to log only when it changes (`503`, `ECONNREFUSED`, ...). */
  lastProbe = '';
  /** A probe request is in flight: no second one is started. */
  probing = false;
  /** Kubernetes replicas: out of rotation because the source says not ready (no recovery probe). */
  heldOut = false;

  /** Readiness poll (starting), periodic or recovery probe (ready / unreachable). */
  probeTimer: NodeJS.Timeout | undefined = undefined;
  /** `startTimeoutMs` (starting). */
  startTimer: NodeJS.Timeout | undefined = undefined;
  /** Idle stop check (ready, launched). */
  idleTimer: NodeJS.Timeout | undefined = undefined;

  constructor(id: string, slot: number, gen: number, now: number) {
    this.id = id;
    this.slot = slot;
    this.gen = gen;
    this.since = now;
    this.createdAt = now;
  }

  /** True when no process of this replica runs (exited, never spawned, or static). */
  get processGone(): boolean {
    return this.process === undefined || this.process.hasExited;
  }

  /** Clears every timer of the current state; called on each transition. */
  clearTimers(): void {
    if (this.probeTimer !== undefined) {
      clearTimeout(this.probeTimer);
      this.probeTimer = undefined;
    }
    if (this.startTimer !== undefined) {
      clearTimeout(this.startTimer);
      this.startTimer = undefined;
    }
    if (this.idleTimer !== undefined) {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
    }
  }
}
