// Launched replicas (`replicas.command`): child processes this gateway starts and stops
// (launches.ts, the policy; the processes: src/control/sources/process.ts).
import type { ReplicaKind } from '../../service/kind-policy.js';
import { ProcessSource } from '../../sources/process.js';
import { Launches } from './launches.js';
import type { UnitPool } from '../../pools/unit-pool.js';

export const launchedKind: ReplicaKind = {
  name: 'launched',
  configured: (service) => service.replicas.command !== undefined && service.replicas.command.length > 0,
  // `max` places, and as many again for replicas gone whose last requests are ending.
  slotCapacity: (service) => service.replicas.max * 2 + 2,
  policy: (service, host) => new Launches(host, new ProcessSource(service, host.log), poolOf(service.replicas.pool, host.options.pools)),
};

/** The pool a service takes units from (`replicas.pool`), as the gateway built it. */
function poolOf(name: string | undefined, pools: ReadonlyMap<string, UnitPool> | undefined): UnitPool | undefined {
  if (name === undefined) return undefined;
  const pool = pools?.get(name);
  if (pool === undefined) throw new Error(`pool ${name} is not built: the gateway builds every pool of the config`);
  return pool;
}
