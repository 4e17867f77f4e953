// Static replicas (`replicas.urls`): each URL is one replica that runs elsewhere. Sluice does not
// start or stop them; it only decides whether to route to them (probes, in the control plane).
import type { ServiceConfig } from '../../config/types.js';
import { hostAndPort } from '../../http/syntax.js';
import type { Endpoint } from './source.js';

/** The replicas of a static service, in rotation from the start. */
export function staticEndpoints(service: ServiceConfig): Endpoint[] {
  return (service.replicas.urls ?? []).map((url) => endpointOf(url));
}

/** The endpoint of a base URL the config loader has validated (http:, no path other than `/`, no query). */
function endpointOf(url: string): Endpoint {
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:') throw new Error(`replica URL must use http: (${url})`);
  const { host, port } = hostAndPort(parsed);
  return { origin: parsed.origin, host: parsed.host, probeHost: host, probePort: port };
}
