// Probes, on the control plane only: the readiness poll of a starting launched replica, the
// periodic probe of a ready replica whose kind asks for it (static, when `readyPath` is set:
// kind-policy.ts `probesWhenReady`), and the recovery probe of a replica out of rotation after a
// refused connection. (Kubernetes endpoints are probed by their source before they are ready:
// src/control/sources/kubernetes/endpoint-probes.ts.) Each result that changes a state goes
// through the service's transition function.
import type { Agent } from 'node:http';
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import { createProbeAgent, probeHttp, probeTcp, type ProbeResult } from '../sources/probe.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { ManagedReplica } from './replica.js';
import type { ReplicaSetTuning } from './tuning.js';

/** What the probes need from the service that owns the replicas. */
export interface HealthOwner {
  transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean;
  /** True once the service is closing: no new probe is scheduled. */
  readonly closing: boolean;
  /** A ready replica is probed periodically when `readyPath` is set (its kind's policy says). */
  readonly probesWhenReady: boolean;
  /** True while the replica's source holds it out of rotation: no recovery probe brings it back. */
  heldOut(r: ManagedReplica): boolean;
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
    const elapsed = performance.now() - r.createdAt;
    const floor = elapsed < 2_000 ? 0 : elapsed < 30_000 ? 25 : 100;
    this.pollReadiness(r, Math.max(this.tuning.readinessPollMs, floor));
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
