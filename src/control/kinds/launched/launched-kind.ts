// Launched replicas (`replicas.command`): child processes this gateway starts and stops
// (launches.ts, the policy; the processes: src/control/sources/process.ts).
import type { ReplicaKind } from '../../service/kind-policy.js';
import { ProcessSource } from '../../sources/process.js';
import { Launches } from './launches.js';

export const launchedKind: ReplicaKind = {
  name: 'launched',
  configured: (service) => service.replicas.command !== undefined && service.replicas.command.length > 0,
  // `max` places, and as many again for replicas gone whose last requests are ending.
  slotCapacity: (service) => service.replicas.max * 2 + 2,
  policy: (service, host) => new Launches(host, new ProcessSource(service, host.log)),
};
