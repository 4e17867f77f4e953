// From EndpointSlices to the endpoints of one port (pure functions; docs/kubernetes.md).
//
// An EndpointSlice lists endpoints (one per pod, `addresses[0]` is the pod's address) with their
// conditions, and the ports of the Service's targets. Kubernetes rules that matter here:
// - `endpoints` may be null (a Service with no pods, fact 15);
// - `conditions.ready` null means unknown and is read as ready; a terminating endpoint has
//   `ready: false` (its `serving` may still be true: Sluice sends it nothing new either way);
// - the same pod can appear in two slices for a moment while the controller moves it: one
//   endpoint per address and port, the entry that is not terminating wins.
import type { V1EndpointSlice } from '@kubernetes/client-node';

/** One replica as Kubernetes reports it. */
export interface SliceEndpoint {
  /** `address:port`, stable while the pod lives: the identity the control plane keys replicas by. */
  id: string;
  address: string;
  port: number;
  /** The pod's name (`targetRef.name`), when the slice says. */
  pod: string | undefined;
  /** Kubernetes' readiness condition (null read as true); false while terminating. */
  kubeReady: boolean;
  /** The pod is shutting down: no new request goes to it; requests in flight on it finish. */
  terminating: boolean;
}

/** The label every EndpointSlice of a Service carries. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/**
 * The endpoints of `port` (a port name, or a number) over every slice, sorted by id. Slices whose
 * address type is not IPv4 or IPv6 (FQDN) are skipped; so are slices without that port.
 */
export function endpointsOf(slices: Iterable<V1EndpointSlice>, port: string | number): SliceEndpoint[] {
  const byId = new Map<string, SliceEndpoint>();
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue;
    const portNumber = findPort(slice, port);
    if (portNumber === undefined) continue;
    for (const ep of slice.endpoints ?? []) {
      const address = ep.addresses?.[0];
      if (address === undefined || address === '') continue;
      const terminating = ep.conditions?.terminating === true;
      const kubeReady = !terminating && ep.conditions?.ready !== false;
      const id = `${address.includes(':') ? `[${address}]` : address}:${portNumber}`;
      const candidate: SliceEndpoint = { id, address, port: portNumber, pod: ep.targetRef?.name, kubeReady, terminating };
      const seen = byId.get(id);
      if (seen === undefined || (seen.terminating && !terminating) || (!seen.kubeReady && kubeReady && !terminating)) byId.set(id, candidate);
    }
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

function findPort(slice: V1EndpointSlice, port: string | number): number | undefined {
  const ports = slice.ports ?? [];
  for (const p of ports) {
    if (p.port === undefined || p.port === null) continue;
    if (typeof port === 'number' ? p.port === port : p.name === port) return p.port;
  }
  return undefined;
}

/** The URL origin of an endpoint: `http://10.0.0.7:8000`, `http://[fd00::7]:8000`. */
export function originOf(ep: { address: string; port: number }): string {
  return `http://${ep.address.includes(':') ? `[${ep.address}]` : ep.address}:${ep.port}`;
}
