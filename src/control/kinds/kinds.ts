// The kinds of replicas a service may have, one folder each beside this file, in the order they
// are recognised: the first whose key of `replicas` is set is the service's kind. Adding a kind:
// docs/architecture.md#adding-a-replica-kind (a folder, a line here, its key in the schema).
import type { ServiceConfig } from '../../config/types.js';
import type { ReplicaKind } from '../service/kind-policy.js';
import { kubernetesKind } from './kubernetes/kubernetes-kind.js';
import { launchedKind } from './launched/launched-kind.js';
import { staticKind } from './static/static-kind.js';

/** Every kind the gateway knows (a test may put one of its own in front). */
export const REPLICA_KINDS: ReplicaKind[] = [kubernetesKind, launchedKind, staticKind];

/** The kind of `service`'s replicas (the config loader has checked that exactly one key is set). */
export function kindOf(service: ServiceConfig): ReplicaKind {
  const kind = REPLICA_KINDS.find((k) => k.configured(service));
  if (kind === undefined) throw new Error(`service ${service.slug}: no kind of replicas is configured`);
  return kind;
}

/** Loads what the kinds of `services` need before their policies are built (`ReplicaKind.load`). */
export async function loadKinds(services: readonly ServiceConfig[]): Promise<void> {
  const kinds = new Set(services.map(kindOf));
  for (const kind of kinds) await kind.load?.();
}
