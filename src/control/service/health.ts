// Probes, on the control plane only: the readiness poll of a starting launched replica, the
// periodic probe of a ready replica whose kind asks for it (static, when `readyPath` is set:
// kind-policy.ts `probesWhenReady`), and the recovery probe of a replica out of rotation after a
// refused connection. (Kubernetes endpoints are probed by their source before they are ready:
// src/control/kinds/kubernetes/endpoint-probes.ts.) Each result that changes a state goes
// through the service's transition function.
import type { Agent } from 'node:http';
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import { createProbeAgent, probeHttp, probeTcp, type ProbeResult } from '../sources/probe.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { ManagedReplica } from './replica.js';
import type { ReplicaSetTuning } from './tuning.js';
import { READY_NEAR_MS } from '../../tunables.js';

/** What the probes need from the service that owns the replicas. */
export interface HealthOwner {
  transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean;
  /** True once the service is closing: no new probe is scheduled. */
  readonly closing: boolean;
  /** A ready replica is probed periodically when `readyPath` is set (its kind's policy says). */
  readonly probesWhenReady: boolean;
  /** True while the replica's source holds it out of rotation: no recovery probe brings it back. */
  heldOut(r: ManagedReplica): boolean;
  /** How long the service's recent starts took (their median, ms), or -1 before any was measured (start-estimate.ts). */
  readonly expectedStartMs: number;
}

/**
 * The wait before the next readiness probe of a replica `elapsedMs` into its start: `pollMs` for
 * its first 2 s, then 25 ms, then 100 ms past 30 s — except around the time its service's starts
 * have taken (`expectedMs`, -1: none measured yet), from READY_NEAR_MS before it to twice that
 * after, where the replica most likely becomes ready: `pollMs` again, so that a request waiting
 * for it (a cold start, a pool's swap) waits for the probe as little as at the start.
 */
export function readinessDelay(elapsedMs: number, expectedMs: number, pollMs: number): number {
  if (expectedMs >= 0 && elapsedMs >= expectedMs - READY_NEAR_MS && elapsedMs <= expectedMs + 2 * READY_NEAR_MS) return pollMs;
  const floor = elapsedMs < 2_000 ? 0 : elapsedMs < 30_000 ? 25 : 100;
  return Math.max(pollMs, floor);
}

export class Health {
  private readonly agent: Agent;

  constructor(
    private readonly service: ServiceConfig,
    private readonly tuning: ReplicaSetTuning,
    private readonly log: Logger,
    private readonly owner: HealthOwner,
  ) {
    this.agent = createProbeAgent(tuning.probeTimeoutMs);
  }

  /** Polls a starting replica until it answers (then `ready`), at a falling rate. */
  pollReadiness(r: ManagedReplica, delay: number): void {
    r.probeTimer = setTimeout(() => void this.poll(r), delay);
    r.probeTimer.unref();
  }

  private async poll(r: ManagedReplica): Promise<void> {
    r.probeTimer = undefined;
    if (r.state !== 'starting' || r.probing) return;
    r.probing = true;
    const result = await this.probe(r);
    r.probing = false;
    if (r.state !== 'starting') return;
    this.note(r, result);
    if (result.ok) {
      this.owner.transition(r, 'ready', 'readiness probe answered');
      return;
    }
    this.pollReadiness(r, readinessDelay(performance.now() - r.createdAt, this.owner.expectedStartMs, this.tuning.readinessPollMs));
  }

  /** Next probe of a ready static replica (with readyPath) or of an unreachable replica. */
  scheduleRecheck(r: ManagedReplica): void {
    if (r.probeTimer !== undefined || this.owner.closing || this.owner.heldOut(r)) return;
    let delay: number;
    if (r.state === 'unreachable') delay = this.tuning.recoveryProbeMs;
    else if (r.state === 'ready' && this.owner.probesWhenReady && this.service.replicas.readyPath !== undefined) delay = this.tuning.probeIntervalMs;
    else return;
    r.probeTimer = setTimeout(() => void this.recheck(r), delay);
    r.probeTimer.unref();
  }

  private async recheck(r: ManagedReplica): Promise<void> {
    r.probeTimer = undefined;
    const state = r.state;
    if (state !== 'ready' && state !== 'unreachable') return;
    if (r.probing) {
      // A probe started in the previous state is still out: look again after the interval.
      this.scheduleRecheck(r);
      return;
    }
    r.probing = true;
    const result = await this.probe(r);
    r.probing = false;
    if (r.state !== state) {
      // Moved meanwhile (its result is stale): make sure the new state's probe is scheduled.
      this.scheduleRecheck(r);
      return;
    }
    this.note(r, result);
    if (this.owner.heldOut(r)) return; // the source took it out meanwhile: it brings it back
    if (state === 'unreachable' && result.ok) {
      this.owner.transition(r, 'ready', 'probe succeeded');
    } else if (state === 'ready' && !result.ok) {
      r.failedAt = performance.now();
      this.owner.transition(r, 'unreachable', 'probe failed', { probe: result.detail });
    } else {
      this.scheduleRecheck(r);
    }
  }

  private probe(r: ManagedReplica): Promise<ProbeResult> {
    const path = this.service.replicas.readyPath;
    return path !== undefined
      ? probeHttp(this.agent, r.origin, path, this.tuning.probeTimeoutMs)
      : probeTcp(r.probeHost, r.probePort, this.tuning.probeTimeoutMs);
  }

  private note(r: ManagedReplica, result: ProbeResult): void {
    if (result.detail === r.lastProbe) return;
    r.lastProbe = result.detail;
    this.log.debug({ service: this.service.slug, replica: r.id, state: r.state, probe: result.detail }, 'replica probe');
  }

  /** Closes the probe connections. */
  close(): void {
    this.agent.destroy();
  }
}
