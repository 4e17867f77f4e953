// Test builds only: hooks a test may switch on in a gateway process it spawns (a route that
// crashes a worker, Kubernetes timings in milliseconds, replica timings such as the ejection
// backoff in milliseconds: SLUICE_TEST_REPLICA_TUNING). The command line reads them once, here,
// and hands them to the gateway. Both NODE_ENV=test and SLUICE_TEST_HOOKS=1 are needed, so no
// production environment turns them on by accident.
import type { TestHooks } from '../gateway/gateway.js';
import type { KubernetesTuning } from '../control/kinds/kubernetes/kubernetes-source.js';
import type { ReplicaSetTuning } from '../control/service/tuning.js';

/** The hooks `env` switches on, or undefined outside a test build. */
export function testHooksFrom(env: NodeJS.ProcessEnv): TestHooks | undefined {
  if (env['NODE_ENV'] !== 'test' || env['SLUICE_TEST_HOOKS'] !== '1') return undefined;
  const tuning = env['SLUICE_TEST_KUBE_TUNING'];
  const replicas = env['SLUICE_TEST_REPLICA_TUNING'];
  return {
    crashRoute: true,
    kubernetesTuning: tuning === undefined ? undefined : (JSON.parse(tuning) as Partial<KubernetesTuning>),
    replicaTuning: replicas === undefined ? undefined : (JSON.parse(replicas) as Partial<ReplicaSetTuning>),
  };
}
