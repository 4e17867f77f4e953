// Static replicas (`replicas.urls`): each URL is one replica that runs elsewhere. Sluice does not
// start or stop them; it only decides whether to route to them (probes, in the control plane).
import type { ServiceConfig } from '../../config-types.js';
import { staticTarget } from '../launchers/static.js';
import type { Endpoint } from './source.js';

/** The replicas of a static service, in rotation from the start. */
export function staticEndpoints(service: ServiceConfig): Endpoint[] {
  return (service.replicas.urls ?? []).map((url) => staticTarget(url));
}
