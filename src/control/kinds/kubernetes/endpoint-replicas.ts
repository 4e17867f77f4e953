// Replicas run by Kubernetes (`replicas.kubernetes`): the policy of their kind, as the control
// plane sees them: the endpoint list of the Kubernetes source (src/control/kinds/kubernetes/) turned
// into replicas of the state machine (ServiceControl, src/control/service/service-control.ts), and the service's demand reported back to
// the source, which raises the Deployment and keeps the idle Lease fresh.
//
//   endpoint new, not terminating  → a replica (`starting`), with a slot and a pool on every thread
//   ready                          → `ready`: requests up to `concurrency`
//   ready → not ready              → `unreachable`, held out until the source says ready again
//                                    (a refused connection also makes it `unreachable`; then the
//                                    control plane's recovery probe brings it back)
//   terminating                    → `draining`: nothing new; requests in flight on it finish, its
//                                    pools stay open
//   gone from the list             → `stopped`: the pod is gone; the data planes close its pools
//
// The queue, its budget and `concurrency` stay the control plane's, as for launched replicas: the
// source never holds a request. Demand is reported on every enqueue and every DEMAND_REPORT_MS: the
// queue length, the requests in flight on the service's replicas (from the shared slot table),
// and whether any request was relayed since the last report (the slot table's idle clock), so a
// gateway whose requests are too short to be seen in flight still keeps the Lease fresh.
import type { ServiceConfig } from '../../../config/types.js';
import type { Logger } from '../../../log/logger.js';
import type { SlotControl } from '../../../replicas/slot-control.js';
import type { ReplicaKindPolicy, ReplicaHost } from '../../service/kind-policy.js';
import type { ManagedReplica } from '../../service/replica.js';
import { type KubeEndpoint, KubernetesReplicaSource } from './kubernetes-source.js';
import type { ReplicaStateName } from '../../../replicas/states.js';

/** How often the service's demand is reported to the source besides each enqueue. */
const DEMAND_REPORT_MS = 200;

export class EndpointReplicas implements ReplicaKindPolicy {
  readonly queuesForColdStart = true;
  readonly probesWhenReady = false;
  readonly panicFallback = false;

  readonly source: KubernetesReplicaSource;
  private readonly slug: string;
  private readonly byId = new Map<string, ManagedReplica>();
  /** The slot table's idle clock of each replica as the control plane itself last set it (at
   *  creation, at readiness): a later value means a request ended on it. */
  private readonly ownStamp = new Map<ManagedReplica, number>();
  /** The pod behind each replica: a new pod at the same address and port is a new replica. */
  private readonly podOf = new Map<ManagedReplica, string | undefined>();
  /** Replicas out of rotation because their endpoint is not ready: no recovery probe for them. */
  private readonly held = new Set<ManagedReplica>();
  /** Endpoints that found no free slot, logged once each. */
  private readonly skipped = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private lastReportAt = Date.now();
  /** When the service went cold with requests waiting (performance.now()), or -1. */
  private coldSince = -1;

  private readonly slots: SlotControl;
  private readonly log: Logger;

  constructor(service: ServiceConfig, private readonly host: ReplicaHost) {
    this.slug = service.slug;
    this.slots = host.slots;
    this.log = host.log;
    const options = host.options.kubernetes ?? {};
    const { readyPath, min, max, idleTimeoutMs, concurrency } = service.replicas;
    // Throws KubeCredentialsError when no credentials can be loaded: a failed start (exit 1).
    this.source = new KubernetesReplicaSource({
      slug: service.slug,
      kubernetes: service.replicas.kubernetes!,
      replicas: { readyPath, min, max, idleTimeoutMs, concurrency },
      logger: this.log,
      ...(options.gatewayId === undefined ? {} : { gatewayId: options.gatewayId }),
      ...(options.tuning === undefined ? {} : { tuning: options.tuning }),
      ...(options.credentials === undefined ? {} : { credentials: options.credentials }),
    });
    this.source.onEndpoints((list) => this.update(list));
  }

  start(): void {
    this.source.start();
    this.timer = setInterval(() => {
      // An endpoint that found no slot gets one once a gone replica's last request has ended.
      if (this.skipped.size > 0) this.update(this.source.endpoints());
      this.report();
    }, DEMAND_REPORT_MS);
    this.timer.unref();
  }

  /** A request was queued: the source may need to raise the Deployment now. */
  demandChanged(): void {
    if (this.coldSince < 0 && this.host.readyReplicas === 0 && this.host.demanded > 0) this.coldSince = performance.now();
    this.report();
  }

  entered(r: ManagedReplica, _from: ReplicaStateName, to: ReplicaStateName, now: number): void {
    // `draining` stays until the endpoint is gone (retire); a pod's replica never fails.
    if (to === 'ready') this.becameReady(r, now);
    else if (to === 'failed') this.host.forget(r);
  }

  /** The cold start in progress counts from the request that found the service cold. */
  startAskedAt(): number {
    return this.coldSince;
  }

  heldOut(r: ManagedReplica): boolean {
    return this.held.has(r);
  }

  pid(): number | undefined {
    return undefined; // the pod's processes are Kubernetes's
  }

  drain(): void {
    // Nothing to stop starting: the source raises the Deployment only from reported demand.
  }

  /** A replica of this feed became ready. */
  private becameReady(r: ManagedReplica, now: number): void {
    this.ownStamp.set(r, this.slots.idleSince(r.slot));
    if (this.coldSince >= 0) {
      this.host.events?.coldStart(this.slug, r.id, now - this.coldSince);
      this.host.startMeasured(now - this.coldSince);
      this.coldSince = -1;
    }
  }

  async close(): Promise<void> {
    this.held.clear();
    clearInterval(this.timer);
    this.timer = undefined;
    await this.source.stop();
  }

  private report(): void {
    const now = Date.now();
    let inflight = 0;
    let relayed = false;
    for (const r of this.byId.values()) {
      inflight += this.slots.inflight(r.slot);
      const idleSince = this.slots.idleSince(r.slot);
      if (idleSince > this.lastReportAt && idleSince !== this.ownStamp.get(r)) relayed = true;
    }
    this.lastReportAt = now;
    const queued = this.host.demanded;
    if (queued === 0) this.coldSince = -1;
    this.source.report(queued, inflight, relayed);
  }

  // ── endpoints → replicas ──────────────────────────────────────────────────────────────────

  private update(list: readonly KubeEndpoint[]): void {
    const listed = new Map(list.map((ep) => [ep.id, ep]));
    // The gone first: their slots may be what a new endpoint needs. An address and port now
    // listed for another pod, or listed again as not terminating after it was (a pod IP reused
    // within one watch event), is a new replica: the old one is gone.
    for (const [id, r] of this.byId) {
      const ep = listed.get(id);
      if (ep !== undefined && ep.pod === this.podOf.get(r) && !(r.state === 'draining' && !ep.terminating)) continue;
      this.retire(id, r);
    }
    for (const id of this.skipped) if (!listed.has(id)) this.skipped.delete(id);
    for (const ep of list) {
      let r = this.byId.get(ep.id);
      if (r === undefined) {
        if (ep.terminating) continue; // never routed to here: nothing to drain
        r = this.host.create();
        if (r === undefined) {
          if (!this.skipped.has(ep.id)) {
            this.skipped.add(ep.id);
            this.log.warn({ service: this.slug, endpoint: ep.id, pod: ep.pod, slots: this.slots.slots }, 'no slot for a kubernetes endpoint; it gets no requests');
          }
          continue;
        }
        this.skipped.delete(ep.id);
        this.byId.set(ep.id, r);
        this.podOf.set(r, ep.pod);
        this.ownStamp.set(r, this.slots.idleSince(r.slot));
        this.host.place(r, { origin: ep.origin, host: ep.host, probeHost: ep.address, probePort: ep.port });
      }
      this.apply(r, ep);
    }
  }

  /** The endpoint's pod is gone: the replica stops, and the data planes close its pools. */
  private retire(id: string, r: ManagedReplica): void {
    this.byId.delete(id);
    this.ownStamp.delete(r);
    this.podOf.delete(r);
    this.held.delete(r);
    if (r.state !== 'draining') this.host.transition(r, 'draining', 'endpoint removed');
    this.host.transition(r, 'stopped', 'endpoint removed');
  }

  private apply(r: ManagedReplica, ep: KubeEndpoint): void {
    if (ep.terminating) {
      if (r.state === 'starting' || r.state === 'ready' || r.state === 'unreachable') this.host.transition(r, 'draining', 'endpoint terminating');
    } else if (ep.ready) {
      if (r.state === 'starting') {
        this.host.transition(r, 'ready', 'endpoint ready');
      } else if (r.state === 'unreachable' && this.held.has(r)) {
        this.held.delete(r);
        this.host.transition(r, 'ready', 'endpoint ready again');
      }
    } else if (r.state === 'ready' || r.state === 'unreachable') {
      // Held out until the source says ready again; the recovery probe does not override it.
      this.held.add(r);
      if (r.state === 'ready') this.host.transition(r, 'unreachable', 'endpoint not ready');
    }
  }
}
