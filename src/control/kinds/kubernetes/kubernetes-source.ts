// The `kubernetes` replica source (docs/kubernetes.md): the replicas of a service are the pods
// behind a Kubernetes Service, run by a Deployment that Sluice scales through its scale
// subresource; several gateways may front the same service and coordinate only through the API
// server (conditional writes, one Lease), with no shared store and no sidecar.
//
// Its interface (the control plane's side is src/control/kinds/kubernetes/endpoint-replicas.ts, which
// turns the list into replicas of the state machine):
//
//   const source = new KubernetesReplicaSource({ slug, kubernetes, replicas, logger });
//   source.onEndpoints((eps) => ...);  // the whole list after every change: id, origin, ready,
//                                      //   terminating (an id no longer listed is gone)
//   source.start();
//   source.report(queued, inflight, relayed);  // on enqueue and on a short interval (gateway-
//                                      //   wide counts): asks for scale-ups and keeps the idle
//                                      //   Lease fresh; cheap, no API call per call
//   await source.stop();
//
// `KubeCredentialsError` from the constructor is a failed start (`sluice serve` exits 1).
//
// The queue, its `maxWaitMs` budget and `concurrency` stay the control plane's, exactly as for
// launched replicas: this source never holds a request. While the API server is unreachable the
// endpoints last seen stay as they were (known pods keep serving) and scale-ups retry with a
// backoff until the queue gives up on them (`503 no_replica` after `queue.maxWaitMs`).
import { hostname } from 'node:os';
import { AppsV1Api, CoordinationV1Api, DiscoveryV1Api, type V1EndpointSlice } from '@kubernetes/client-node';
import type { KubernetesTarget } from '../../../config/types.js';
import type { Logger } from '../../../log/logger.js';
import { ApiTrouble, sleep, statusOf } from './api-trouble.js';
import { type CredentialOptions, type KubeCredentials, loadCredentials } from './credentials.js';
import { EndpointProbes } from './endpoint-probes.js';
import { EndpointSliceWatch } from './endpoint-watch.js';
import { endpointsOf, originOf, type SliceEndpoint } from './endpoints.js';
import { IdleCoordinator } from './idle-lease.js';
import { CONFLICT, DeploymentScaler, type ScaleReading, wantedReplicas } from './scaler.js';

/** The Kubernetes source's timings: `DEFAULT_KUBERNETES_TUNING` below. */
const KUBERNETES_TIMINGS = {
  backoffBaseMs: 250,
  backoffMaxMs: 10_000,
  watchTimeoutSeconds: 300,
  watchStallMs: 330_000,
  probeIntervalMs: 200,
  probeTimeoutMs: 2_000,
  scaleCacheMs: 2_000,
  callTimeoutMs: 10_000,
} as const;

/** The replica settings that apply to a Kubernetes service. */
export interface KubernetesReplicaSettings {
  readyPath?: string | undefined;
  min: number;
  max: number;
  idleTimeoutMs: number;
  /** Requests in flight per replica; 0 = unlimited. */
  concurrency: number;
}

export interface KubernetesTuning {
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Asked of the API server for each watch request. */
  watchTimeoutSeconds: number;
  /** No event or bookmark for this long: the watch is restarted. */
  watchStallMs: number;
  /** Readiness probes of a new endpoint: this often until it answers 2xx. */
  probeIntervalMs: number;
  probeTimeoutMs: number;
  /** A scale decision that needed no write is trusted this long (no re-read per queue change). */
  scaleCacheMs: number;
  /** Deadline of every API call but the watch (which has watchStallMs). */
  callTimeoutMs: number;
}

const DEFAULT_KUBERNETES_TUNING: Readonly<KubernetesTuning> = Object.freeze({ ...KUBERNETES_TIMINGS });

export interface KubernetesSourceOptions {
  /** The service's slug (logs). */
  slug: string;
  kubernetes: KubernetesTarget;
  replicas: KubernetesReplicaSettings;
  logger: Logger;
  /** This gateway's name in the Lease; default: host name (the pod's name) and process id. */
  gatewayId?: string;
  tuning?: Partial<KubernetesTuning>;
  /** Tests: the environment and service-account directory used to find credentials. */
  credentials?: Pick<CredentialOptions, 'env' | 'inClusterPrefix'>;
}

/** What the gateway's owner may set for every Kubernetes service (tests: timings, credentials, name). */
export interface KubernetesKindOptions {
  tuning?: Partial<KubernetesTuning> | undefined;
  credentials?: Pick<CredentialOptions, 'env' | 'inClusterPrefix'> | undefined;
  gatewayId?: string | undefined;
}

/** One replica, as the control plane sees it. */
export interface KubeEndpoint extends SliceEndpoint {
  /** `http://10.0.0.7:8000` */
  origin: string;
  /** The Host header value: `10.0.0.7:8000`. */
  host: string;
  /** Routable: not terminating, and answered `readyPath` (or, without one, Kubernetes says ready). */
  ready: boolean;
}

export type { KubernetesTarget };

type EndpointListener = (endpoints: readonly KubeEndpoint[]) => void;

export class KubernetesReplicaSource {
  readonly credentials: KubeCredentials;
  private readonly slug: string;
  private readonly target: KubernetesTarget;
  private readonly settings: KubernetesReplicaSettings;
  private readonly tuning: KubernetesTuning;
  private readonly log: Logger;
  private readonly context: Record<string, unknown>;
  private readonly trouble: ApiTrouble;
  private readonly watch: EndpointSliceWatch;
  private readonly scaler: DeploymentScaler;
  private readonly idle: IdleCoordinator;
  /** This gateway's probes of new endpoints (with readyPath only). */
  private readonly probes: EndpointProbes | undefined;
  private readonly stopper = new AbortController();
  private readonly listeners: EndpointListener[] = [];

  private slices: SliceEndpoint[] = [];
  private list: KubeEndpoint[] = [];

  private queued = 0;
  private inflight = 0;
  private active = false;
  private scaling: Promise<void> | undefined;
  private scaleAgain = false;
  /** The last Scale read, and when: a decision that needs no write does not re-read for a while. */
  private lastScale: ScaleReading | undefined;
  private lastScaleAt = -Infinity;
  private started = false;
  /** The slices list pods but none at `port` (warned once). */
  private portWarned = false;

  constructor(options: KubernetesSourceOptions) {
    this.slug = options.slug;
    this.target = options.kubernetes;
    this.settings = options.replicas;
    this.tuning = { ...DEFAULT_KUBERNETES_TUNING, ...options.tuning };
    this.credentials = loadCredentials({ kubeconfig: this.target.kubeconfig, namespace: this.target.namespace, ...options.credentials });
    const { kubeConfig, namespace } = this.credentials;
    this.log = options.logger;
    this.context = { service: this.slug, namespace, deployment: this.target.deployment };
    this.trouble = new ApiTrouble(this.log, this.context, this.tuning);
    this.scaler = new DeploymentScaler(kubeConfig.makeApiClient(AppsV1Api), namespace, this.target.deployment, this.tuning.callTimeoutMs);
    this.watch = new EndpointSliceWatch(
      kubeConfig,
      kubeConfig.makeApiClient(DiscoveryV1Api),
      namespace,
      this.target.service,
      this.trouble,
      this.log,
      this.tuning,
      (slices) => this.slicesChanged(slices),
    );
    this.idle = new IdleCoordinator(
      kubeConfig.makeApiClient(CoordinationV1Api),
      this.scaler,
      `sluice-${this.target.service}`,
      options.gatewayId ?? `${hostname()}-${process.pid}`,
      this.settings.idleTimeoutMs,
      this.settings.min,
      this.trouble,
      this.log,
      this.context,
      this.tuning.callTimeoutMs,
    );
    this.probes =
      this.settings.readyPath === undefined
        ? undefined
        : new EndpointProbes(this.settings.readyPath, this.tuning, this.log, this.context, () => this.publish());
  }

  /** Starts the watch and the idle checks. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.log.info(
      { ...this.context, endpointsOf: this.target.service, port: this.target.port, credentials: this.credentials.source, server: this.credentials.server },
      'kubernetes replica source started',
    );
    this.watch.start();
    this.idle.start();
  }

  async stop(): Promise<void> {
    this.stopper.abort();
    this.idle.stop();
    await this.watch.stop();
    await this.scaling;
    this.probes?.close();
  }

  /** Calls `listener` with the whole endpoint list after every change (and now, if known). */
  onEndpoints(listener: EndpointListener): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i !== -1) this.listeners.splice(i, 1);
    };
  }

  endpoints(): readonly KubeEndpoint[] {
    return this.list;
  }

  /**
   * The service's requests in this gateway: waiting for a replica, in flight, and whether any was
   * relayed since the last report (requests too short to be seen in flight still count as traffic).
   */
  report(queued: number, inflight: number, relayed = false): void {
    const wasActive = this.active;
    const grew = queued > this.queued;
    this.queued = queued;
    this.inflight = inflight;
    const active = queued + inflight > 0 || relayed;
    this.active = active;
    if (active || wasActive) this.idle.activity(active);
    if (queued > 0 && (grew || this.scaling === undefined)) this.scaleUp();
  }

  // ---- endpoints ---------------------------------------------------------------------------------

  private slicesChanged(slices: Iterable<V1EndpointSlice>): void {
    const all = [...slices];
    this.slices = endpointsOf(all, this.target.port);
    this.checkPort(all);
    this.lastScaleAt = -Infinity; // pods came or went: the next decision reads the Scale again
    const live = this.slices.filter((ep) => !ep.terminating);
    this.probes?.track(live);
    this.idle.replicasSeen(live.length);
    this.publish();
    if (this.queued > 0) this.scaleUp();
  }

  /** Pods are listed but none at `port`: the config names a port the Service does not have. */
  private checkPort(slices: V1EndpointSlice[]): void {
    const unmatched = this.slices.length === 0 && slices.some((slice) => (slice.endpoints?.length ?? 0) > 0);
    if (unmatched && !this.portWarned) {
      const ports = [...new Set(slices.flatMap((slice) => (slice.ports ?? []).map((p) => `${p.name ?? ''}:${String(p.port)}`)))];
      this.log.warn({ ...this.context, port: this.target.port, ports }, 'kubernetes endpoints have no port matching replicas.kubernetes.port (the Service port name or the target port number)');
    }
    this.portWarned = unmatched;
  }

  private publish(): void {
    const next: KubeEndpoint[] = this.slices.map((ep) => {
      const origin = originOf(ep);
      // Without readyPath Kubernetes' condition decides; with it, this gateway's own probe does.
      const ready = !ep.terminating && (this.probes === undefined ? ep.kubeReady : this.probes.ok(ep.id));
      return { ...ep, origin, host: origin.slice('http://'.length), ready };
    });
    if (sameList(next, this.list)) return;
    const before = new Map(this.list.map((e) => [e.id, e]));
    for (const ep of next) {
      const old = before.get(ep.id);
      if (old === undefined || old.ready !== ep.ready || old.terminating !== ep.terminating) {
        this.log.info({ ...this.context, endpoint: ep.id, pod: ep.pod, ready: ep.ready, terminating: ep.terminating }, 'kubernetes endpoint');
      }
      before.delete(ep.id);
    }
    for (const gone of before.values()) this.log.info({ ...this.context, endpoint: gone.id, pod: gone.pod, gone: true }, 'kubernetes endpoint');
    this.list = next;
    for (const l of this.listeners) {
      try {
        l(next);
      } catch (err) {
        this.log.error({ ...this.context, err }, 'endpoint listener threw');
      }
    }
  }

  // ---- scale-up ----------------------------------------------------------------------------------

  private routable(): number {
    let n = 0;
    for (const ep of this.list) if (ep.ready) n++;
    return n;
  }

  /** Raises `spec.replicas` while requests wait here that the pods up or coming cannot take. */
  private scaleUp(): void {
    if (this.stopper.signal.aborted || !this.started) return;
    if (this.scaling !== undefined) {
      this.scaleAgain = true;
      return;
    }
    this.scaling = this.scaleLoop().finally(() => {
      this.scaling = undefined;
      // No request waits any more (or the source stopped): a failure of these calls is no longer
      // an outage anyone is waiting out, and the next one must warn again.
      this.trouble.abandoned('scale.get');
      this.trouble.abandoned('scale.raise');
      if (this.scaleAgain && this.queued > 0) {
        this.scaleAgain = false;
        this.scaleUp();
      }
    });
  }

  private async scaleLoop(): Promise<void> {
    const { concurrency, max } = this.settings;
    while (!this.stopper.signal.aborted && this.queued > 0) {
      this.scaleAgain = false;
      let reading = this.lastScale;
      if (reading === undefined || performance.now() - this.lastScaleAt > this.tuning.scaleCacheMs) {
        try {
          reading = await this.scaler.read();
          this.trouble.succeeded('scale.get');
        } catch (err) {
          await sleep(this.trouble.failed('scale.get', err), this.stopper.signal);
          continue;
        }
        this.lastScale = reading;
        this.lastScaleAt = performance.now();
      }
      const want = wantedReplicas(reading.replicas, this.routable(), this.queued, this.inflight, concurrency, max);
      if (want <= reading.replicas) return; // covered: by pods up or coming, or at max
      try {
        const after = await this.scaler.raise(reading, want);
        this.trouble.succeeded('scale.raise');
        this.lastScale = after;
        this.lastScaleAt = performance.now();
        this.log.info({ ...this.context, from: reading.replicas, to: after.replicas, queued: this.queued, ready: this.routable() }, 'kubernetes deployment scaled up');
      } catch (err) {
        this.lastScaleAt = -Infinity;
        if (statusOf(err) === CONFLICT) {
          // Another gateway (or a status change) wrote first: read again and decide again.
          this.log.debug({ ...this.context, from: reading.replicas, to: want }, 'scale-up conflict; reading again');
          continue;
        }
        await sleep(this.trouble.failed('scale.raise', err), this.stopper.signal);
      }
    }
  }
}

function sameList(a: readonly KubeEndpoint[], b: readonly KubeEndpoint[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.id !== y.id || x.ready !== y.ready || x.terminating !== y.terminating || x.kubeReady !== y.kubeReady || x.pod !== y.pod) return false;
  }
  return true;
}
