// Static replicas (`replicas.urls`): the policy of their kind. Each URL is one replica that runs
// elsewhere; Sluice does not start or stop them, it only decides whether to route to them.
//
// - They are `ready` from the start, and probed while ready (every `probeIntervalMs`, with
//   `readyPath`): nothing else would tell that one stopped answering.
// - A cold service never queues: nothing would start a replica, so a request that finds none
//   ready gets its answer at once.
// - When every replica is out of rotation, the one taken out longest ago is handed out anyway
//   (the "panic" rule of Envoy): if the probe was wrong the request succeeds; if the replica is
//   really down the retry finds nothing and the caller gets `502 upstream_unavailable` within
//   milliseconds.
// - Draining one means stopping to route to it: it is `stopped` at once.
import type { ServiceConfig } from '../../../config/types.js';
import type { ReplicaHost, ReplicaKind, ReplicaKindPolicy } from '../../service/kind-policy.js';
import type { ManagedReplica } from '../../service/replica.js';
import { staticEndpoints } from '../../sources/static.js';
import type { ReplicaStateName } from '../../../replicas/states.js';

class StaticReplicas implements ReplicaKindPolicy {
  readonly queuesForColdStart = false;
  readonly probesWhenReady = true;
  readonly panicFallback = true;

  constructor(
    private readonly service: ServiceConfig,
    private readonly host: ReplicaHost,
  ) {}

  start(): void {
    for (const endpoint of staticEndpoints(this.service)) {
      const r = this.host.create();
      if (r === undefined) throw new Error('static replicas: a slot per URL'); // slotCapacity gives one each
      this.host.place(r, endpoint);
      this.host.transition(r, 'ready', 'static replica');
    }
  }

  demandChanged(): void {
    // Nothing to start: the replicas run elsewhere.
  }

  entered(r: ManagedReplica, _from: ReplicaStateName, to: ReplicaStateName): void {
    if (to === 'ready') this.host.health.scheduleRecheck(r);
    else if (to === 'draining') this.host.transition(r, 'stopped', 'no process to stop');
    else if (to === 'failed') this.host.forget(r);
  }

  heldOut(): boolean {
    return false;
  }

  pid(): number | undefined {
    return undefined;
  }

  drain(): void {
    // Nothing to stop starting.
  }

  async close(): Promise<void> {
    // Nothing runs here.
  }
}

export const staticKind: ReplicaKind = {
  name: 'static',
  configured: (service) => service.replicas.urls !== undefined,
  slotCapacity: (service) => Math.max(1, (service.replicas.urls ?? []).length),
  policy: (service, host) => new StaticReplicas(service, host),
};
