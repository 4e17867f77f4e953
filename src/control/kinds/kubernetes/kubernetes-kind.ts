// Replicas run by Kubernetes (`replicas.kubernetes`): the pods behind a Service, scaled through
// their Deployment (endpoint-replicas.ts, the policy; the source: src/control/sources/kubernetes/).
import type { ReplicaKind } from '../../service/kind-policy.js';
import { EndpointReplicas } from './endpoint-replicas.js';

export const kubernetesKind: ReplicaKind = {
  name: 'kubernetes',
  configured: (service) => service.replicas.kubernetes !== undefined,
  // Room beyond `max` for pods someone else adds (an HPA) and for terminating ones.
  slotCapacity: (service) => Math.min(1024, service.replicas.max * 2 + 16),
  policy: (service, host) => new EndpointReplicas(service, host),
};
