// One data plane: a uWS app with the relay route (front-end.ts), this thread's view of every
// service's replicas, the access log and the per-request counters. Runs in each worker thread
// (src/data/worker.ts), or on the main thread with `workers: 1`.
import * as uWS from 'uWebSockets.js';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { type AccessLine, AccessLog } from '../access-log.js';
import type { Config, TokenConfig } from '../config-types.js';
import type { Logger } from '../log.js';
import type { RequestCounters } from '../metrics/request-counters.js';
import { tokenEntries } from '../relay/auth.js';
import type { RelayRequest } from '../relay/relay.js';
import type { ReplicaSet } from '../replicas/types.js';
import { describeUpstreamError } from '../upstream/errors.js';
import { FrontEnd, type FrontEndOwner, ServiceEntry } from './front-end.js';
import { createApp, listenOn } from './listen.js';
import { addOpsRoutes, type OpsSource } from './ops-routes.js';
import { SharedAuthLimiter } from './shared-auth-limiter.js';

export interface DataPlaneOptions {
  config: Config;
  logger: Logger;
  /** This thread's view of each service's replicas, in config order. */
  replicas: readonly ReplicaSet[];
  counter: RequestCounters;
  /** The gateway-wide authentication failure table (shared-auth-limiter.ts). */
  authFailures: SharedArrayBuffer;
  /** The gateway-wide state the ops endpoints report, when they are on the relay listener. */
  ops: OpsSource | undefined;
  /** Test builds only (NODE_ENV=test and SLUICE_TEST_HOOKS=1): extra routes on the relay listener. */
  testRoutes?: (app: TemplatedApp) => void;
}

export class DataPlane implements FrontEndOwner {
  readonly app: TemplatedApp;
  readonly frontEnd: FrontEnd;
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

  constructor(private readonly options: DataPlaneOptions) {
    const { config } = options;
    this.logger = options.logger;
    this.accessLog = new AccessLog(options.logger);
    this.counter = options.counter;
    this.ops = options.ops;
    const services = new Map<string, ServiceEntry>();
    config.services.forEach((service, i) => services.set(service.slug, new ServiceEntry(service, options.replicas[i]!, i, this.counter.streams(i))));
    this.frontEnd = new FrontEnd(config.basePath, services, this, this.logger, new SharedAuthLimiter(options.authFailures));
    this.app = createApp(config.listen.tls);
    if (options.ops !== undefined) {
      const frontEnd = this.frontEnd;
      addOpsRoutes(this.app, options.ops, this.logger, (res, error, close, head) => frontEnd.refuse(res, error, close, undefined, head));
    }
    options.testRoutes?.(this.app);
    this.app.any('/*', this.frontEnd.handle);
  }

  /** True once this thread or the gateway drains: new relay requests get `503 draining`. */
  get draining(): boolean {
    return this.localDraining || (this.ops?.draining ?? false);
  }

  async listen(host: string, port: number, exclusive: boolean): Promise<number> {
    this.listenSocket = await listenOn(this.app, host, port, exclusive);
    this.port = uWS.us_socket_local_port(this.listenSocket);
    return this.port;
  }

  onRelayStarted(): void {
    this.inflight += 1;
    this.counter.started();
  }

  onRelayFinished(r: RelayRequest): void {
    this.inflight -= 1;
    const now = performance.now();
    const d = r.downstream;
    const status = r.outcome === 'client_closed' ? 499 : d.answered ? d.statusCode : (r.error?.status ?? 500);
    const ttfbMs = d.firstByteAt > 0 ? d.firstByteAt - r.startedAt : -1;
    const ms = now - r.startedAt;
    this.counter.finished(r.slug, status, r.outcome, r.body.received, d.bytesOut, ttfbMs / 1000, ms / 1000);
    const failed = r.outcome !== 'ok' && r.outcome !== 'client_closed';
    if (this.accessLog.enabled(failed)) this.accessLog.write(accessLine(r, status, ttfbMs, ms), failed);
    if (this.inflight === 0 && this.idleWaiter !== undefined) this.idleWaiter();
  }

  /** Stops accepting connections; new requests on open ones get `503 draining`. */
  stopAccepting(): void {
    this.localDraining = true;
    if (this.listenSocket !== undefined) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
  }

  /** Stops accepting and waits until nothing is in flight, or `timeoutMs`. */
  async drain(timeoutMs: number): Promise<void> {
    this.stopAccepting();
    if (this.inflight === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.idleWaiter = () => {
        clearTimeout(timer);
        resolve();
      };
    });
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

  /** Applies reloaded tokens; the slugs that are not served here (a restart adds services). */
  reload(services: readonly { slug: string; tokens: TokenConfig[] }[]): string[] {
    const ignored: string[] = [];
    for (const next of services) {
      const service = this.frontEnd.services.get(next.slug);
      if (service === undefined) ignored.push(next.slug);
      else service.tokens = tokenEntries(next.tokens);
    }
    return ignored;
  }

  get config(): Config {
    return this.options.config;
  }
}

/** The access-log line of a finished request. */
function accessLine(r: RelayRequest, status: number, ttfbMs: number, ms: number): AccessLine {
  const stream = r.stream;
  return {
    reqId: r.requestId,
    service: r.slug,
    tokenName: r.tokenName,
    method: r.method,
    path: r.path,
    status,
    outcome: r.outcome,
    bytesIn: r.body.received,
    bytesOut: r.downstream.bytesOut,
    ttfbMs: ttfbMs >= 0 ? round(ttfbMs) : undefined,
    ms: round(ms),
    queuedMs: r.queuedAt > 0 ? round(r.queuedMs) : undefined,
    retried: r.retried || undefined,
    keptAlive: r.downstream.keptAlive || undefined,
    events: stream?.events,
    firstEventMs: stream === undefined || stream.events === 0 ? undefined : round(stream.firstEventMs),
    maxGapMs: stream === undefined || stream.events < 2 ? undefined : round(stream.maxGapMs),
    err: r.error?.cause === undefined ? undefined : describeUpstreamError(r.error.cause),
  };
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
