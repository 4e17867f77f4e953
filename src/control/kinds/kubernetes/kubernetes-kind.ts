// Replicas run by Kubernetes (`replicas.kubernetes`): the pods behind a Service, scaled through
// their Deployment (endpoint-replicas.ts, the policy; the source: kubernetes-source.ts and the files beside it).
// The policy and the Kubernetes client behind it are imported only by a gateway with such a
// service (`load`): the client's modules hold about 28 MB of heap and 75 MB of memory, which
// every major collection of a gateway without them would otherwise mark again.
import type { ReplicaKind } from '../../service/kind-policy.js';
import type { EndpointReplicas } from './endpoint-replicas.js';
import type { KubernetesKindOptions } from './kubernetes-source.js';

declare module '../../service/kind-policy.js' {
  interface KindOptions {
    /** The Kubernetes kind's options (tests: timings, credentials, the gateway's name). */
    kubernetes?: KubernetesKindOptions | undefined;
  }
}

let policyClass: typeof EndpointReplicas | undefined;

export const kubernetesKind: ReplicaKind = {
  name: 'kubernetes',
  configured: (service) => service.replicas.kubernetes !== undefined,
  // Room beyond `max` for pods someone else adds (an HPA) and for terminating ones.
  slotCapacity: (service) => Math.min(1024, service.replicas.max * 2 + 16),
  load: async () => {
    policyClass ??= (await import('./endpoint-replicas.js')).EndpointReplicas;
  },
  policy: (service, host) => {
    if (policyClass === undefined) throw new Error(`service ${service.slug}: the kubernetes kind was not loaded before its policy was built`);
    return new policyClass(service, host);
  },
};
