// The Deployment's `spec.replicas`, through its scale subresource (docs/kubernetes.md):
// read it, raise it, lower it, each write conditional on the resourceVersion the gateway read, so
// that N gateways that saw the same state write once and the others get 409 and look again.
//
// - A Scale at 0 replicas comes back as `spec: {}` (fact 15): no `replicas` means 0.
// - Raises are a merge patch carrying `metadata.resourceVersion` (the API server checks it as a
//   precondition); a merge patch works whether or not `spec.replicas` is present, where a JSON
//   Patch `test`/`replace` of `/spec/replicas` fails with 422 at zero.
// - The idle lower to `min` is an update (PUT) of the Scale read, with its resourceVersion.
// - Every pod status change bumps the Deployment's resourceVersion, so 409 is routine: the caller
//   reads again and decides again (a raise someone else made may already cover it).
import { type AppsV1Api, type ConfigurationOptions, PatchStrategy, type V1Scale } from '@kubernetes/client-node';
import { callOptions } from './api-trouble.js';

export interface ScaleReading {
  replicas: number;
  resourceVersion: string;
}

/** Why a conditional write did not happen: someone else wrote first (409). */
export const CONFLICT = 409;

export class DeploymentScaler {
  private readonly options: ConfigurationOptions;
  private readonly mergePatch: ConfigurationOptions;

  constructor(
    private readonly api: AppsV1Api,
    readonly namespace: string,
    readonly deployment: string,
    /** Deadline of each call. */
    timeoutMs: number,
  ) {
    this.options = callOptions(timeoutMs);
    this.mergePatch = callOptions(timeoutMs, PatchStrategy.MergePatch);
  }

  async read(): Promise<ScaleReading> {
    const scale = await this.api.readNamespacedDeploymentScale({ name: this.deployment, namespace: this.namespace }, this.options);
    return reading(scale);
  }

  /** Sets `spec.replicas` to `to` if the Scale is still at `from.resourceVersion` (else throws 409). */
  async raise(from: ScaleReading, to: number): Promise<ScaleReading> {
    const scale = await this.api.patchNamespacedDeploymentScale(
      {
        name: this.deployment,
        namespace: this.namespace,
        body: { metadata: { resourceVersion: from.resourceVersion }, spec: { replicas: to } },
      },
      this.mergePatch,
    );
    return reading(scale);
  }

  /** Replaces the Scale read with one at `to` replicas, conditional on its resourceVersion. */
  async lower(from: ScaleReading, to: number): Promise<ScaleReading> {
    const scale = await this.api.replaceNamespacedDeploymentScale({
      name: this.deployment,
      namespace: this.namespace,
      body: {
        apiVersion: 'autoscaling/v1',
        kind: 'Scale',
        metadata: { name: this.deployment, namespace: this.namespace, resourceVersion: from.resourceVersion },
        spec: { replicas: to },
      },
    }, this.options);
    return reading(scale);
  }
}

function reading(scale: V1Scale): ScaleReading {
  return { replicas: scale.spec?.replicas ?? 0, resourceVersion: scale.metadata?.resourceVersion ?? '' };
}

/**
 * What one gateway asks of `spec.replicas`, given what it read and what it sees
 * (docs/kubernetes.md#cold-start-and-scale-up; the same rule as for launched replicas):
 * - no request waiting here: nothing (`current`);
 * - requests wait, and neither the room left on routable pods (`routable × concurrency −
 *   inflight`) nor the pods already coming (`current − routable`, `concurrency` each) can take
 *   them: one more than `current`, never above `max`; at least 1 for a cold service. With
 *   unlimited `concurrency` one routable or coming pod takes them all (a queue that has not been
 *   handed to a pod that just became ready is not a reason for another pod).
 * Never less than `current`: a gateway never lowers what another one raised.
 */
export function wantedReplicas(current: number, routable: number, queued: number, inflight: number, concurrency: number, max: number): number {
  if (queued <= 0 || current >= max) return current;
  const coming = Math.max(0, current - routable);
  if (concurrency === 0) return routable + coming > 0 ? current : current + 1;
  const room = Math.max(0, routable * concurrency - inflight) + coming * concurrency;
  if (queued <= room) return current;
  return Math.min(max, current + 1);
}
