// One data plane: a uWS app with the relay route (relay/request-filter.ts), this thread's view of
// every service's replicas, the access log and the per-request counters. Runs in each worker thread
// (src/data/worker.ts), or on the main thread with `workers: 1`.
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { AccessLog } from '../log/access-log.js';
import type { Config, RouterConfig } from '../config/types.js';
import { LimitTable } from '../limits/limit-table.js';
import type { Logger } from '../log/logger.js';
import type { RequestCounters } from '../metrics/request-counters.js';
import { supersede } from '../relay/request/auth.js';
import { accessLine, finishedRequest, settledTokens } from '../relay/finished-request.js';
import type { RoutersReload, TokensReload } from '../threads/messages.js';
import { ModelRouter, routedModels } from '../relay/model-router.js';
import { Refusals } from '../relay/request/refusal.js';
import type { RelayRequest } from '../relay/relay.js';
import { RequestFilter, type RequestFilterOwner, ServiceEntry } from '../relay/request-filter.js';
import { RequestIds } from '../relay/request/request-ids.js';
import type { ReplicaSet } from '../relay/replica-set.js';
import { createApp, listenOn } from './listen.js';
import { addOpsRoutes, type OpsSource } from './ops-routes.js';
import { SharedAuthLimiter } from './shared-auth-limiter.js';
import { uws } from '../http/uws-build.js';
import { settlesWithin } from '../time/bounded-wait.js';
import { OpenSessions } from '../relay/session/open-sessions.js';
import type { RelaySession } from '../relay/session/relay-session.js';
import { SessionFilter, type SessionFilterOwner } from '../relay/session/session-filter.js';
import { sessionFailed, sessionLine } from '../relay/session/session-record.js';
import type { TracingSettings } from '../config/tracing-config.js';
import { Tracer } from '../tracing/tracer.js';

export interface DataPlaneOptions {
  config: Config;
  logger: Logger;
  /** This thread's view of each service's replicas, in config order. */
  replicas: readonly ReplicaSet[];
  counter: RequestCounters;
  /** The gateway-wide authentication failure table (shared-auth-limiter.ts). */
  authFailures: SharedArrayBuffer;
  /** The gateway-wide limit table (limits/limit-table.ts) and, per service, each token's cell set or -1. */
  limits: SharedArrayBuffer;
  limitCells: readonly (readonly number[])[];
  /** The reload of the tokens those cell sets are of (limits/limit-cells.ts). */
  limitReload: number;
  /** Each model's `created` (gateway/model-births.ts), until a reload says it anew. */
  modelsCreated: Readonly<Record<string, number>>;
  /** This data plane's thread index (its row of holds in the limit table); 0 on the main thread. */
  thread: number;
  /** The gateway-wide state the ops endpoints report, when they are on the relay listener. */
  ops: OpsSource | undefined;
  /** Test builds only (NODE_ENV=test and SLUICE_TEST_HOOKS=1): extra routes on the relay listener. */
  testRoutes?: (app: TemplatedApp) => void;
}

export class DataPlane implements RequestFilterOwner, SessionFilterOwner {
  readonly app: TemplatedApp;
  readonly filter: RequestFilter;
  port = 0;
  inflight = 0;
  /** The app is being closed: responses cut now were cut by the gateway (RelayObserver). */
  closing = false;
  private localDraining = false;
  private listenSocket: us_listen_socket | undefined;
  private idleWaiter: (() => void) | undefined;
  private readonly logger: Logger;
  private readonly accessLog: AccessLog;
  private readonly counter: RequestCounters;
  private readonly ops: OpsSource | undefined;
  private readonly limitTable: LimitTable;
  /** The realtime sessions open now (their time-outs, the drain). */
  private readonly sessions = new OpenSessions();

  constructor(private readonly options: DataPlaneOptions) {
    const { config } = options;
    this.logger = options.logger;
    this.accessLog = new AccessLog(options.logger);
    this.counter = options.counter;
    this.ops = options.ops;
    this.limitTable = new LimitTable(options.limits, options.thread);
    this.limitTable.applied(options.thread, options.limitReload);
    const services = new Map<string, ServiceEntry>();
    config.services.forEach((service, i) =>
      services.set(service.slug, new ServiceEntry(service, options.replicas[i]!, i, this.counter.streams(i), this.limitTable, options.limitCells[i]!, this.counter.tokens)),
    );
    const ids = new RequestIds();
    const refusals = new Refusals(this.logger, ids);
    const routers = this.routersOf(config.routers ?? [], config.services, services, options.limitCells.slice(config.services.length), options.modelsCreated);
    const authLimiter = new SharedAuthLimiter(options.authFailures);
    this.filter = new RequestFilter(config.basePath, services, routers, this, authLimiter, ids, refusals);
    this.app = createApp(config.listen.tls);
    if (options.ops !== undefined) addOpsRoutes(this.app, options.ops, this.logger, refusals);
    options.testRoutes?.(this.app);
    // Realtime sessions: uWS hands a WebSocket handshake to this route and every other request to the next.
    const largestMessage = Math.max(1, ...config.services.map((s) => s.sessions.maxMessageBytes));
    new SessionFilter(config.basePath, this.filter, this, authLimiter, ids, refusals).addRoute(this.app, config.basePath, largestMessage);
    this.app.any('/*', this.filter.handle);
    this.filter.tracer = this.tracerOf(config.tracing);
  }

  /** A Tracer for `settings` (tracing/tracer.ts), or undefined while tracing is off. */
  private tracerOf(settings: TracingSettings | undefined): Tracer | undefined {
    return settings === undefined ? undefined : new Tracer(settings, this.options.config.basePath, this.counter, this.logger);
  }

  /**
   * A reload's tracing settings (SIGHUP): a new Tracer when they changed. Requests traced before end
   * in the old one, which sends what it holds and stops.
   */
  private retrace(settings: TracingSettings | undefined): void {
    const before = this.filter.tracer;
    if (JSON.stringify(before?.settings) === JSON.stringify(settings)) return;
    this.filter.tracer = this.tracerOf(settings);
    if (before !== undefined) void before.close();
    this.logger.info({ tracing: settings === undefined ? 'off' : settings.url }, 'tracing reloaded');
  }

  /** The last spans sent (bounded: tracing/span-export.ts), at shutdown. */
  async closeTracing(): Promise<void> {
    await this.filter.tracer?.close();
  }

  /** True once this thread or the gateway drains: new relay requests get `503 draining`. */
  get draining(): boolean {
    return this.localDraining || (this.ops?.draining ?? false);
  }

  async listen(host: string, port: number, exclusive: boolean): Promise<number> {
    this.listenSocket = await listenOn(this.app, host, port, exclusive);
    this.port = uws().us_socket_local_port(this.listenSocket);
    return this.port;
  }

  onRelayStarted(): void {
    this.inflight += 1;
    this.counter.started();
  }

  onRelayFinished(r: RelayRequest): void {
    this.inflight -= 1;
    const f = finishedRequest(r, performance.now());
    if (r.trace !== undefined) r.trace.finish(r, f);
    if (r.limit !== undefined) this.limitTable.end(r.limit, r.reserved, settledTokens(r, f));
    this.counter.finished(f.slug, f.status, f.outcome, f.bytesIn, f.bytesOut, f.ttfbMs / 1000, f.ms / 1000);
    if (f.promptTokens > 0 || f.completionTokens > 0) this.counter.tokens.add(r.token.usagePlace, f.promptTokens, f.completionTokens);
    if (this.accessLog.enabled(f.failed)) this.accessLog.write(accessLine(r, f), f.failed);
    if (this.inflight === 0 && this.idleWaiter !== undefined) this.idleWaiter();
  }

  onSessionStarted(): void {
    this.onRelayStarted();
  }

  onSessionOpen(session: RelaySession): void {
    this.sessions.add(session);
  }

  /** A session is over: as a request's end, with its own line (relay/session/session-record.ts). */
  onSessionFinished(s: RelaySession): void {
    this.inflight -= 1;
    this.sessions.delete(s);
    const usage = s.usage;
    const now = performance.now();
    if (s.limit !== undefined) this.limitTable.end(s.limit, s.reserved, usage.promptTokens + usage.completionTokens);
    this.counter.finished(s.slug, s.status, s.outcome, s.bytesIn, s.bytesOut, s.openedAt > 0 ? (s.openedAt - s.startedAt) / 1000 : -1, (now - s.startedAt) / 1000);
    if (usage.reported) this.counter.tokens.add(s.token.usagePlace, usage.promptTokens, usage.completionTokens);
    const failed = sessionFailed(s);
    if (this.accessLog.enabled(failed)) {
      if (failed) this.logger.warn(sessionLine(s, now), 'session');
      else this.logger.info(sessionLine(s, now), 'session');
    }
    if (this.inflight === 0 && this.idleWaiter !== undefined) this.idleWaiter();
  }

  /** Stops accepting connections; new requests on open ones get `503 draining`, open sessions close with `1001`. */
  stopAccepting(): void {
    this.localDraining = true;
    this.sessions.drain();
    if (this.listenSocket !== undefined) uws().us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
  }

  /** Stops accepting and waits until nothing is in flight, or `timeoutMs`. */
  async drain(timeoutMs: number): Promise<void> {
    this.stopAccepting();
    if (this.inflight === 0) return;
    await settlesWithin(new Promise<void>((resolve) => (this.idleWaiter = resolve)), timeoutMs);
    this.idleWaiter = undefined;
  }

  /**
   * Closes the listener and every connection. What is still in flight ends as `draining` when the
   * gateway shuts down, and as before (`client_closed`) when this thread fails (`failed`).
   */
  close(failed = false): void {
    this.stopAccepting();
    this.closing = !failed;
    this.app.close();
  }

  /**
   * Applies reloaded tokens (reload `reload`: limits/limit-cells.ts); the slugs that are not served
   * here (a restart adds services). The entries they replace point to their successors (a request
   * still to be admitted is admitted as its token is now: auth.ts, `currentEntry`), and once they
   * are applied the limit table hears of it, so that a cell set of a removed token can go to another.
   */
  reload(services: readonly TokensReload[], routers: RoutersReload | undefined, reload: number, tracing: TracingSettings | undefined): string[] {
    this.retrace(tracing);
    const ignored: string[] = [];
    for (const next of services) {
      const service = this.filter.services.get(next.slug);
      if (service === undefined) ignored.push(next.slug);
      else {
        const before = service.tokens;
        service.tokens = service.entries(next.tokens, next.limits, next.cells);
        supersede(before, service.tokens);
      }
    }
    if (routers !== undefined) {
      // Routers are rebuilt whole over the services served here: a model added to a running service routes at once.
      const running = this.options.config.services.filter((s) => this.filter.services.has(s.slug));
      const models = new Map(routers.models.map((m) => [m.slug, m.models]));
      const now = running.map((s) => ({ slug: s.slug, models: models.get(s.slug) }));
      const before = this.filter.routers;
      this.filter.routers = this.routersOf(routers.routers, now, this.filter.services, routers.cells, routers.created);
      for (const [slug, router] of before) supersede(router.tokens, this.filter.routers.get(slug)?.tokens ?? []);
    }
    this.limitTable.applied(this.options.thread, reload);
    return ignored;
  }

  /** This thread's routers over `services` (each service's models as `list` says). */
  private routersOf(routers: readonly RouterConfig[], list: readonly { slug: string; models?: string[] | undefined }[], services: ReadonlyMap<string, ServiceEntry>, cells: readonly (readonly number[])[], created: Readonly<Record<string, number>>): Map<string, ModelRouter> {
    const byIndex = list.map((s) => services.get(s.slug)!);
    const out = new Map<string, ModelRouter>();
    routers.forEach((router, i) => {
      const models = routedModels(router, list, byIndex);
      // A router whose services are not served here (a restart adds services) waits for the restart.
      if (models.length > 0) out.set(router.slug, new ModelRouter(router, this.options.config.basePath, models, created, this.limitTable, cells[i] ?? router.tokens.map(() => -1), this.counter.tokens));
    });
    return out;
  }

  get config(): Config {
    return this.options.config;
  }
}
