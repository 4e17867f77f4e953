// One replica as the control plane manages it: the state machine (one union type, the table of
// allowed moves) and its bookkeeping. The one transition function that moves a replica, logs it
// and reacts to it is `ServiceControl.transition` in service-control.ts, because every reaction
// (hand out the queue, fail waiters, start a replacement) is the service's business. The data
// planes see a replica only as its slot in the shared table (src/replicas/slots.ts).
import type { ReplicaStateName } from '../../replicas/states.js';

/** The allowed moves; anything else is a bug and is refused (and logged) by the transition. */
const TRANSITIONS: Readonly<Record<ReplicaStateName, readonly ReplicaStateName[]>> = {
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

/** `starting`, `ready` or `unreachable`: the states counted against `min`. */
export function isLive(state: ReplicaStateName): boolean {
  return state === 'starting' || state === 'ready' || state === 'unreachable';
}

/**
 * The control plane's record of one replica, the same for every kind: where it is, its state and
 * its probes. What only one kind needs (a launched replica's process and timers, a pod's name) is
 * kept by that kind's policy (src/control/kinds/), keyed by the replica.
 */
export class ManagedReplica {
  readonly id: string;
  /** Its place in the shared slot table, and the generation of the slot it got. */
  readonly slot: number;
  readonly gen: number;
  /** `http://127.0.0.1:PORT`; empty until a launched replica's port is chosen. */
  origin = '';
  /** `127.0.0.1:PORT`; empty until a launched replica's port is chosen. */
  host = '';
  /** Host name and port for the TCP probe (without `readyPath`). */
  probeHost = '';
  probePort = 0;

  state: ReplicaStateName = 'starting';
  /** Clock (ms, `performance.now()`) when the current state was entered. */
  since: number;
  readonly createdAt: number;
  /** Clock when it was last taken out of rotation; the panic fallback picks the oldest. */
  failedAt = 0;

  /** The last probe result, to log only when it changes (`503`, `ECONNREFUSED`, ...). */
  lastProbe = '';
  /** A probe request is in flight: no second one is started. */
  probing = false;
  /** Readiness poll (starting), periodic or recovery probe (ready / unreachable). */
  probeTimer: NodeJS.Timeout | undefined = undefined;

  constructor(id: string, slot: number, gen: number, now: number) {
    this.id = id;
    this.slot = slot;
    this.gen = gen;
    this.since = now;
    this.createdAt = now;
  }

  /** Clears the probe timer of the current state; called on each transition. */
  clearTimers(): void {
    if (this.probeTimer !== undefined) {
      clearTimeout(this.probeTimer);
      this.probeTimer = undefined;
    }
  }
}
