// The gateway on the main thread: the control plane (docs/architecture.md#two-planes).
//
//   main thread     config, replica sources, state machine, scaling, probes, the queue, drain,
//                   reload, the admin listener, /metrics rendering
//   data plane(s)   uWS app on the relay port, relay, upstream pools, this thread's replica view
//
// `workers: 1` runs the one data plane on the main thread, calling the control plane directly
// (today's single-thread costs: no thread, no message). `workers: N > 1` (0 = one per CPU) runs N
// worker threads sharing the port, coordinated through shared slot tables and messages.
import type { TracingSettings } from '../config/tracing-config.js';
import { AdminPage } from '../admin/page.js';
import { addOnDemandRoutes } from '../admin/on-demand.js';
import { poolSummaries, routerSummaries } from '../config/summary.js';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Config } from '../config/types.js';
import { RelayError } from '../http/errors.js';
import type { Logger } from '../log/logger.js';
import { Metrics } from '../metrics/metrics.js';
import { routerUsageBlocks } from '../metrics/token-usage.js';
import { RequestCounters } from '../metrics/request-counters.js';
import { resolveWorkers } from './cpu-count.js';
import { LocalReplicaSet } from './local-replica-set.js';
import { DataPlane } from '../data/data-plane.js';
import { createApp, listenOn } from '../data/listen.js';
import { loadUwsBuild, uws, uwsBuild } from '../http/uws-build.js';
import { createAuthLimiterBuffer } from '../data/shared-auth-limiter.js';
import { LimitCells, limitedTokens } from '../limits/limit-cells.js';
import { LimitControl } from '../limits/limit-control.js';
import { createLimitBuffer } from '../limits/limit-memory.js';
import type { LimitStore } from '../limits/store/limit-store.js';
import { settlesWithin } from '../time/bounded-wait.js';
import type { RoutersReload, TokensReload } from '../threads/messages.js';
import { modelBirths } from './model-births.js';
import { LIMIT_STORE_COMMAND_MS, LIMIT_TABLE_SPARE } from '../tunables.js';

import { addOpsRoutes, refusedOpsRequest, type OpsSource } from '../data/ops-routes.js';
import { Refusals } from '../relay/request/refusal.js';
import { RequestIds } from '../relay/request/request-ids.js';
import { FLAG_COUNT, FLAG_DRAINING, FLAG_READY } from '../threads/messages.js';
import { checkPortFree } from './port-check.js';
import type { KindOptions } from '../control/service/kind-policy.js';
import { kindOf, loadKinds } from '../control/kinds/kinds.js';
import { Pools } from '../control/pools/pools.js';
import { registerPoolMetrics } from '../metrics/pool-metrics.js';
import { registerCertificateMetrics } from '../metrics/certificate-metrics.js';
import { CertificateWatch } from './certificate-watch.js';
import { ServiceControl } from '../control/service/service-control.js';
import { DEFAULT_TUNING, type ReplicaSetTuning } from '../control/service/tuning.js';
import type { KubernetesTuning } from '../control/kinds/kubernetes/kubernetes-source.js';
import { WorkerPool } from './worker-pool.js';

/** How often the control plane keeps idle tokens' arrival times in the limit table's range (limits/limit-control.ts). */
const LIMIT_SWEEP_MS = 60_000;

export interface Gateway {
  /** The port the relay listens on (the real one when the config said 0). */
  readonly port: number;
  /** The port of the separate operations listener, if the config has `admin`. */
  readonly adminPort: number | undefined;
  /** Data plane threads (1: the main thread itself). */
  readonly workers: number;
  /** Stops accepting, answers queued requests `503 draining`, lets streams finish until `drainTimeoutMs`, then closes. */
  drain(): Promise<void>;
  /** Closes everything now: listeners, connections, replicas. */
  close(): Promise<void>;
  /** Applies the tokens of a reloaded config (SIGHUP); other changes need a restart. */
  reload(config: Config): void;
}

export interface GatewayOptions {
  logger: Logger;
  /** Test builds only: what the command line found switched on (src/cli/test-hooks.ts). */
  testHooks?: TestHooks;
}

/** What a test may switch on in a gateway process it spawns. */
export interface TestHooks {
  /** `POST /__sluice_test/crash-worker` on the relay listener makes a worker fail as a bug would. */
  crashRoute: boolean;
  /** The Kubernetes source's timings, so tests back off and probe in milliseconds. */
  kubernetesTuning: Partial<KubernetesTuning> | undefined;
  /** The replica sets' timings (an ejection's backoff, probes), so tests wait milliseconds. */
  replicaTuning?: Partial<ReplicaSetTuning> | undefined;
}

class ControlPlane implements Gateway, OpsSource {
  port = 0;
  adminPort: number | undefined = undefined;
  readonly workers: number;
  private readonly logger: Logger;
  private readonly registry: Metrics;
  /** The listener's and the limit store's certificates: warned about as they end, and their metric. */
  private readonly certificates: CertificateWatch;
  private readonly flagsBuffer = new SharedArrayBuffer(4 * FLAG_COUNT);
  private readonly flags = new Int32Array(this.flagsBuffer);
  private readonly authFailures = createAuthLimiterBuffer();
  /** The limit table every data plane shares, and which token has which of its cell sets. */
  private readonly limitBuffer: SharedArrayBuffer;
  private readonly limitCells: LimitCells;
  private readonly limitSweep: NodeJS.Timeout;
  /** `limits.store`: the shared store's client and its top-ups of the table. */
  private readonly limitStore: LimitStore | undefined;
  /** The tokens as last applied (start or reload): what a replacement worker starts with. */
  private tokens: TokensReload[];
  /** The routers as last applied (tokensOf), likewise. */
  private routers: RoutersReload = { routers: [], models: [], cells: [], created: {} };
  /** Tracing as last applied (start or reload), likewise. */
  private tracing: TracingSettings | undefined;
  private readonly services: ServiceControl[] = [];
  /** The pools of units launched replicas take from (docs/configuration.md#pools). */
  private readonly pools: Pools;
  /** `workers: 1`: the data plane on this thread and the services' local halves. */
  private local: { plane: DataPlane; sets: LocalReplicaSet[] } | undefined;
  private pool: WorkerPool | undefined;
  private adminApp: TemplatedApp | undefined;
  private adminPage: AdminPage | undefined;
  private adminSocket: us_listen_socket | undefined;
  private drained: Promise<void> | undefined;
  private closed: Promise<void> | undefined;

  constructor(
    private readonly config: Config,
    options: GatewayOptions,
    loaded: Loaded,
  ) {
    this.logger = options.logger;
    // A certificate uWS cannot use fails the start with its reason before any replica set or
    // worker has started (each data plane then builds its own app).
    createApp(config.listen.tls).close();
    this.certificates = new CertificateWatch(this.logger);
    if (config.listen.tls !== undefined) this.certificates.inUseFile('listen', config.listen.tls.certFile);
    // workers: 0 resolves to the CPUs this process may use (the cgroup quota in a container).
    this.workers = resolveWorkers(config.workers);
    this.registry = new Metrics(config.services.map((s) => s.slug), routerUsageBlocks(config.routers?.length ?? 0));
    const { store, storePasswordFile, storeCaFile, storeCertFile, storeKeyFile, prefix, onStoreDown } = config.limits;
    this.limitBuffer = createLimitBuffer(2 * limitedTokens(config) + LIMIT_TABLE_SPARE, this.workers, store === undefined ? undefined : { refuseWhenDown: onStoreDown === 'refuse' });
    this.limitCells = new LimitCells(new LimitControl(this.limitBuffer));
    this.tokens = this.tokensOf(config);
    this.tracing = config.tracing;
    this.registry.rateLimited(() => this.limitCells.refusals());
    this.limitStore = store === undefined || loaded.LimitStore === undefined ? undefined : new loaded.LimitStore({ url: store, passwordFile: storePasswordFile, caFile: storeCaFile, certFile: storeCertFile, keyFile: storeKeyFile, prefix, buffer: this.limitBuffer, tokens: () => this.limitCells.synced(), logger: this.logger, certificates: this.certificates });
    this.registry.limitStoreErrors(() => this.limitStore?.errors ?? 0);
    this.registry.prefixRouting(() => this.services.flatMap((s) => s.prefixHits().map((row) => ({ service: s.slug, ...row }))));
    this.limitSweep = setInterval(() => this.limitCells.sweep(), LIMIT_SWEEP_MS).unref();
    const ops = config.admin === undefined ? this : undefined;
    const tuning = options.testHooks?.kubernetesTuning;
    this.pools = new Pools(config.pools, this.logger);
    registerPoolMetrics(this.registry.registry, () => this.pools.readings());
    registerCertificateMetrics(this.registry.registry, () => this.certificates.readings());
    const kindOptions: KindOptions = { pools: this.pools.byName, ...(tuning === undefined ? {} : { kubernetes: { tuning } }) };
    const replicaTuning = options.testHooks?.replicaTuning ?? {};
    if (this.workers === 1) {
      const sets: LocalReplicaSet[] = [];
      this.buildServices(() => {
        for (const service of config.services) {
          const set = new LocalReplicaSet(service, { logger: this.logger, events: this.registry, kindOptions, tuning: replicaTuning });
          sets.push(set);
          this.services.push(set.control);
        }
      });
      const plane = new DataPlane({ config, logger: this.logger, replicas: sets.map((set) => set.view), counter: this.registry.counters, authFailures: this.authFailures, limits: this.limitBuffer, limitCells: this.cellsFor(config), limitReload: this.limitCells.reload, modelsCreated: this.routers.created, thread: 0, ops });
      this.local = { plane, sets };
    } else {
      // Each worker counts into its own shared store; a scrape sums them (metrics/collectors.ts).
      const layout = this.registry.layout;
      const stores = Array.from({ length: this.workers }, () => new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength)));
      for (const store of stores) this.registry.addCounters(store);
      const pool = new WorkerPool({
        logger: this.logger,
        services: this.services,
        init: (thread, port) => ({
          config: this.withTokens(config),
          thread,
          port,
          slots: this.services.map((service) => service.slots.init),
          queuesForColdStart: this.services.map((service) => service.queuesForColdStart),
          store: stores[thread]!.buffer as SharedArrayBuffer,
          storeRouters: layout.routers,
          flags: this.flagsBuffer,
          authFailures: this.authFailures,
          limits: this.limitBuffer,
          limitCells: this.cellsFor(config),
          limitReload: this.limitCells.reload,
          modelsCreated: this.routers.created,
          testRoutes: options.testHooks?.crashRoute ?? false,
          uwsBuild: uwsBuild()!.id,
          poolCloseMs: replicaTuning.poolCloseMs ?? DEFAULT_TUNING.poolCloseMs,
        }),
        render: () => this.metricsText(),
        limitsGone: (thread) => this.limitCells.reclaim(thread),
        countersOf: (thread) => stores[thread]!,
      });
      this.buildServices(() => {
        config.services.forEach((service, s) => {
          this.services.push(new ServiceControl(service, { logger: this.logger, events: this.registry, kind: kindOf(service), threads: this.workers, views: pool.router(s), kindOptions, tuning: replicaTuning }));
        });
      });
      this.pool = pool;
    }
    if (config.admin !== undefined) {
      this.adminApp = uws().App();
      const refusals = new Refusals(this.logger, new RequestIds());
      addOpsRoutes(this.adminApp, this, this.logger, refusals);
      this.adminPage = new AdminPage(this.adminApp, { config, logger: this.logger, metrics: this.registry, services: this.services, relayPort: () => this.port, limits: () => this.limitCells.usage(), pools: () => this.pools.snapshot(), routers: () => this.routers });
      addOnDemandRoutes(this.adminApp, {
        services: this.services,
        tokens: config.admin.tokens,
        logger: this.logger,
        refusals: { refusedHead: (res, req) => refusedOpsRequest(res, req, false, refusals), refuse: (res, error, head = false) => refusals.refuse(res, error, false, undefined, head) },
      });
      this.adminApp.any('/*', (res, req) => refusals.refuse(res, new RelayError('not_found'), false, undefined, req.getMethod() === 'head'));
    }
  }

  /**
   * Builds the services; when one cannot be built (no Kubernetes credentials), the ones already
   * built are closed (their watches and timers stopped) before the error reaches the caller.
   */
  private buildServices(build: () => void): void {
    try {
      build();
    } catch (err) {
      for (const service of this.services) void service.close();
      throw err;
    }
  }

  // ── OpsSource ────────────────────────────────────────────────────────────────────────────

  get ready(): boolean {
    return Atomics.load(this.flags, FLAG_READY) === 1;
  }

  get draining(): boolean {
    return Atomics.load(this.flags, FLAG_DRAINING) === 1;
  }

  metrics(): Promise<{ text: string; contentType: string }> {
    return this.metricsText();
  }

  private async metricsText(): Promise<{ text: string; contentType: string }> {
    return { text: await this.registry.render(), contentType: this.registry.contentType };
  }

  // ── start ────────────────────────────────────────────────────────────────────────────────

  async listen(): Promise<void> {
    const { host, port } = this.config.listen;
    if (this.local !== undefined) {
      this.port = await this.local.plane.listen(host, port, true);
    } else {
      const pool = this.pool!;
      for (let attempt = 1; ; attempt++) {
        const chosen = await checkPortFree(host, port);
        try {
          pool.port = this.port = await pool.start(0, chosen);
          break;
        } catch (err) {
          // Port 0: another program took the port between the check and the first worker.
          if (port !== 0 || attempt >= 5) throw err;
        }
      }
      await Promise.all(Array.from({ length: this.workers - 1 }, (_, i) => this.startWorker(i + 1)));
    }
    if (this.adminApp !== undefined) {
      this.adminSocket = await listenOn(this.adminApp, this.config.admin!.host, this.config.admin!.port, true);
      this.adminPort = uws().us_socket_local_port(this.adminSocket);
    }
    // The shared limit store's first answer, for a bounded time: down, requests follow onStoreDown.
    if (this.limitStore !== undefined) await settlesWithin(this.limitStore.ready, LIMIT_STORE_COMMAND_MS);
    // Ready only now: a worker that listens alone would get every connection a client opens as
    // soon as /readyz says 200, and keep-alive keeps them there.
    Atomics.store(this.flags, FLAG_READY, 1);
    const line: Record<string, unknown> = { host, port: this.port, adminPort: this.adminPort, workers: this.workers, basePath: this.config.basePath, services: this.config.services.map((s) => s.slug) };
    // Routers and pools as applied now (a reload may have changed the routers' models).
    const routed = { routers: this.routers.routers, services: this.routers.models };
    if (routed.routers.length > 0) line['routers'] = Object.fromEntries(routerSummaries(routed).map((r) => [r.slug, r.models]));
    if (this.config.pools.length > 0) line['pools'] = Object.fromEntries(poolSummaries(this.config).map((p) => [p.name, { size: p.size, services: p.services }]));
    line['uws'] = uwsBuild()!.id;
    this.logger.info(line, 'gateway listening');
  }

  /** Starts worker `thread` on the port the first one took; a failure is retried twice. */
  private async startWorker(thread: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.pool!.start(thread, this.port);
        return;
      } catch (err) {
        if (attempt >= 3) throw err;
        this.logger.warn({ worker: thread, attempt, err }, 'worker failed to start, trying again');
      }
    }
  }

  // ── drain and close ──────────────────────────────────────────────────────────────────────

  drain(): Promise<void> {
    this.drained ??= this.runDrain();
    return this.drained;
  }

  private async runDrain(): Promise<void> {
    Atomics.store(this.flags, FLAG_DRAINING, 1);
    const started = performance.now();
    const timeoutMs = this.config.drainTimeoutMs;
    this.logger.info({ workers: this.workers, timeoutMs }, 'drain started');
    for (const service of this.services) service.drain();
    if (this.local !== undefined) await this.local.plane.drain(timeoutMs);
    else await this.pool!.drain(timeoutMs);
    this.logger.info({ ms: Math.round(performance.now() - started) }, 'drain finished');
    await this.close();
  }

  close(): Promise<void> {
    this.closed ??= this.runClose();
    return this.closed;
  }

  private async runClose(): Promise<void> {
    clearInterval(this.limitSweep);
    this.certificates.close();
    await this.limitStore?.close();
    Atomics.store(this.flags, FLAG_DRAINING, 1);
    if (this.adminSocket !== undefined) uws().us_listen_socket_close(this.adminSocket);
    this.adminSocket = undefined;
    this.adminPage?.close();
    this.adminApp?.close();
    // No start gets units any more; the replicas' exits still give theirs back.
    this.pools.close();
    // Closing the apps aborts what is still streaming (each request logs client_closed).
    if (this.local !== undefined) {
      this.local.plane.close();
      await Promise.all([...this.local.sets.map((set) => set.close()), this.local.plane.closeTracing()]);
    } else {
      await this.pool!.close();
      await Promise.all(this.services.map((service) => service.close()));
    }
    this.logger.info({}, 'gateway closed');
  }

  /** Each service's tokens and limits in `config`, with the cell sets of its limited tokens (assigned now); its routers kept in `routers`. */
  private tokensOf(config: Config): TokensReload[] {
    const cells = this.limitCells.assign(config);
    const n = config.services.length;
    const created = modelBirths(config, this.routers.created, Date.now());
    this.routers = { routers: config.routers ?? [], models: config.services.map((s) => ({ slug: s.slug, models: s.models })), cells: cells.slice(n), created };
    return config.services.map((s, i) => ({ slug: s.slug, tokens: s.tokens, limits: s.limits, cells: cells[i]! }));
  }

  /** The start config with the tokens as last applied, for a worker started now (the rest of a reload waits for a restart). */
  private withTokens(config: Config): Config {
    const bySlug = new Map(this.tokens.map((t) => [t.slug, t]));
    const models = new Map(this.routers.models.map((m) => [m.slug, m.models]));
    return {
      ...config,
      services: config.services.map((s) => {
        const now = bySlug.get(s.slug);
        return now === undefined ? s : { ...s, tokens: now.tokens, limits: now.limits, models: models.get(s.slug) };
      }),
      routers: this.routers.routers,
      tracing: this.tracing,
    };
  }

  /** Per service of the start config, each token's cell set as last applied (withTokens's tokens). */
  private cellsFor(config: Config): number[][] {
    const bySlug = new Map(this.tokens.map((t) => [t.slug, t.cells]));
    return [...config.services.map((s) => bySlug.get(s.slug) ?? s.tokens.map(() => -1)), ...this.routers.cells];
  }

  reload(config: Config): void {
    // Throws (the reload is refused, nothing changed) when the limit table has no room for the new limited tokens.
    const services = this.tokensOf(config);
    this.tokens = services;
    // Tracing is applied by each data plane too (a new Tracer when its settings changed).
    this.tracing = config.tracing;
    // The store's password and CA files are read again (the rest of `limits` waits for a restart).
    this.limitStore?.reloadFiles();
    // The queue's depth series follow the tokens' priorities (a restart adds services).
    for (const { slug, tokens } of services) this.services.find((service) => service.slug === slug)?.tokensReloaded(tokens);
    if (this.local !== undefined) {
      const ignored = this.local.plane.reload(services, this.routers, this.limitCells.reload, this.tracing);
      this.logger.info({ services: services.map((s) => s.slug).filter((slug) => !ignored.includes(slug)), ignored }, 'tokens reloaded');
    } else {
      // Each worker applies them and logs `tokens reloaded` with its index.
      this.pool!.broadcast({ t: 'tokens', services, routers: this.routers, reload: this.limitCells.reload, tracing: this.tracing });
    }
  }
}

/**
 * What only some configs need, imported when the config does (a gateway without it carries
 * neither the code nor its heap): the limit store with its Redis client, when `limits.store` is
 * set. The replica kinds' own modules (the Kubernetes client: about 28 MB of heap) are loaded
 * by `loadKinds` before it.
 */
interface Loaded {
  LimitStore: typeof LimitStore | undefined;
}

/** Builds the gateway and starts listening. Rejects with a one-line reason if it cannot. */
export async function startGateway(config: Config, options: GatewayOptions): Promise<Gateway> {
  // The front end's build, chosen before anything uses uWS (the CLI has chosen it already, from
  // SLUICE_UWS_BUILD; otherwise the newest that loads); workers load the same one.
  await loadUwsBuild();
  await loadKinds(config.services);
  const loaded: Loaded = { LimitStore: config.limits.store === undefined ? undefined : (await import('../limits/store/limit-store.js')).LimitStore };
  const gateway = new ControlPlane(config, options, loaded);
  try {
    await gateway.listen();
  } catch (err) {
    await gateway.close();
    throw err;
  }
  return gateway;
}

