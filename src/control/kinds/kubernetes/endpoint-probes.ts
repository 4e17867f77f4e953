// Each gateway's own readiness probe of new Kubernetes endpoints (docs/kubernetes.md): with
// `readyPath` set, an endpoint is routable once `GET readyPath` answers 2xx, before or after
// Kubernetes marks it ready, and never while it does not answer. Probes go through their own
// node:http Agent (src/control/sources/probe.ts), never through the relay's connections.
import type { Agent } from 'node:http';
import type { Logger } from '../../../log/logger.js';
import { createProbeAgent, probeHttp } from '../../sources/probe.js';
import { originOf, type SliceEndpoint } from './endpoints.js';

export interface ProbeTuning {
  /** A new endpoint is probed this often until it answers 2xx (more often in its first 30 s). */
  probeIntervalMs: number;
  probeTimeoutMs: number;
}

interface ProbeState {
  endpoint: SliceEndpoint;
  /** performance.now() when this gateway first saw the endpoint (or saw it taken out). */
  since: number;
  ok: boolean;
  timer: NodeJS.Timeout | undefined;
  probing: boolean;
  /** Probe again when the one in flight returns (its answer may predate a change). */
  again: boolean;
}

export class EndpointProbes {
  private readonly agent: Agent;
  private readonly probes = new Map<string, ProbeState>();
  private closed = false;

  constructor(
    private readonly readyPath: string,
    private readonly tuning: ProbeTuning,
    private readonly log: Logger,
    private readonly context: Record<string, unknown>,
    /** An endpoint's probe result changed. */
    private readonly changed: () => void,
  ) {
    this.agent = createProbeAgent(tuning.probeTimeoutMs);
  }

  /** Follows the endpoints that are not terminating: probes new ones, forgets the others. */
  track(live: readonly SliceEndpoint[]): void {
    const ids = new Set<string>();
    for (const ep of live) {
      ids.add(ep.id);
      let p = this.probes.get(ep.id);
      if (p !== undefined && p.endpoint.pod !== ep.pod) {
        // Another pod at the same address and port: its answer is not the old pod's.
        clearTimeout(p.timer);
        this.probes.delete(ep.id);
        p = undefined;
      }
      if (p === undefined) {
        const fresh: ProbeState = { endpoint: ep, since: performance.now(), ok: false, timer: undefined, probing: false, again: false };
        this.probes.set(ep.id, fresh);
        this.probe(fresh);
        continue;
      }
      const tookOut = p.endpoint.kubeReady && !ep.kubeReady;
      p.endpoint = ep;
      if (tookOut && p.ok) {
        // Kubernetes took it out of rotation (its readiness probe failed): ours must pass again.
        p.ok = false;
        p.since = performance.now();
        this.probe(p);
      }
    }
    for (const [id, p] of this.probes) {
      if (ids.has(id)) continue;
      clearTimeout(p.timer);
      this.probes.delete(id);
    }
  }

  /** The endpoint answered its probe (and has not been taken out of rotation since). */
  ok(id: string): boolean {
    return this.probes.get(id)?.ok === true;
  }

  close(): void {
    this.closed = true;
    for (const p of this.probes.values()) clearTimeout(p.timer);
    this.probes.clear();
    this.agent.destroy();
  }

  /**
   * A pod that just appeared is often seconds from ready, sometimes minutes (a model loading):
   * every 25 ms for its first 2 s, every 100 ms until 30 s, then every `probeIntervalMs`, so the
   * requests waiting for it go out within milliseconds of its first answer without polling a slow
   * pod hard.
   */
  private nextDelay(p: ProbeState): number {
    const age = performance.now() - p.since;
    const schedule = age < 2_000 ? 25 : age < 30_000 ? 100 : Infinity;
    return Math.min(this.tuning.probeIntervalMs, schedule);
  }

  private probe(p: ProbeState): void {
    if (this.closed) return;
    if (p.probing) {
      p.again = true;
      return;
    }
    clearTimeout(p.timer);
    p.timer = undefined;
    p.probing = true;
    p.again = false;
    void probeHttp(this.agent, originOf(p.endpoint), this.readyPath, this.tuning.probeTimeoutMs).then((result) => {
      p.probing = false;
      if (this.closed || this.probes.get(p.endpoint.id) !== p) return;
      if (p.again) {
        this.probe(p);
        return;
      }
      if (result.ok) {
        p.ok = true;
        this.log.debug({ ...this.context, endpoint: p.endpoint.id }, 'kubernetes endpoint answered its readiness probe');
        this.changed();
        return;
      }
      p.timer = setTimeout(() => this.probe(p), this.nextDelay(p));
      p.timer.unref();
    });
  }
}
