// Static replicas (`replicas.urls`): each URL is one replica that runs elsewhere. Sluice does not
// start or stop them; it only decides whether to route to them (probes, in the control plane).
import type { ServiceConfig } from '../../config-types.js';
import { staticTarget } from '../../replicas/launchers/static.js';
import type { Endpoint, ReplicaSource } from './source.js';

export class StaticSource implements ReplicaSource {
  readonly kind = 'static';

  constructor(private readonly service: ServiceConfig) {}

  initial(): Endpoint[] {
    return (this.service.replicas.urls ?? []).map((url) => staticTarget(url));
  }

  start(): Promise<Endpoint> {
    return Promise.reject(new Error('static replicas are not started by Sluice'));
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }
}
