// The one state of a service that `/status`, the overview page and a router's models on them show
// (docs/operations.md#status), from what is true of the service now.
import type { LiveService } from './status-source.js';

export type ServiceState = 'cold' | 'starting' | 'ready' | 'draining';

/**
 * `draining` once the service stopped taking requests; else `ready` with a replica ready; else
 * `starting` with a replica starting or requests waiting for one (a Kubernetes Deployment raised
 * whose pod is not an endpoint yet, a launch waiting for its pool's units), as a router's model
 * list says (src/data/replica-view.ts, readiness); else `cold`.
 */
export function serviceState(live: Pick<LiveService, 'accepting' | 'replicas' | 'queued'>): ServiceState {
  if (!live.accepting) return 'draining';
  if ((live.replicas['ready'] ?? 0) > 0) return 'ready';
  if ((live.replicas['starting'] ?? 0) > 0 || live.queued > 0) return 'starting';
  return 'cold';
}
