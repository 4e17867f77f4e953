// The uWebSockets.js front end: the relay route, the operations endpoints, and the drain.
//
// requestFilter runs synchronously inside the uWS handler, cheapest check first, and nothing
// costly happens before authentication (contract section 2):
//   request head (framing, header syntax, method token, raw target: relay/request-head.ts, whatever
//   the route) → route → service → method → draining → auth rate limit → token → path → size
// Every refusal is answered on the next turn of the event loop (see `refuse`).
// then a RelayRequest (src/relay/relay.ts) takes over.
import { randomBytes } from 'node:crypto';
import * as uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { type AccessLine, AccessLog } from './access-log.js';
import type { Config, ServiceConfig } from './config-types.js';
import { resolveWorkers } from './cpu-count.js';
import { RelayError } from './errors.js';
import type { Logger } from './log.js';
import { Metrics } from './metrics/metrics.js';
import { AuthFailureLimiter } from './relay/auth-limiter.js';
import { authenticate, type TokenEntry, tokenEntries } from './relay/auth.js';
import { writeError } from './relay/downstream.js';
import { readCallerHeaders } from './relay/headers.js';
import { pathProblem, queryProblem } from './relay/path.js';
import { checkRequestHead } from './relay/request-head.js';
import { type RelayObserver, RelayRequest, type ServiceRuntime } from './relay/relay.js';
import { createReplicaSet } from './replicas/replica-set.js';
import type { ReplicaSet } from './replicas/types.js';
import { describeUpstreamError } from './upstream/errors.js';

export interface Gateway {
  /** The port the relay listens on (the real one when the config said 0). */
  readonly port: number;
  /** The port of the separate operations listener, if the config has `admin`. */
  readonly adminPort: number | undefined;
  /** Stops accepting, answers queued requests `503 draining`, lets streams finish until `drainTimeoutMs`, then closes. */
  drain(): Promise<void>;
  /** Closes everything now: listeners, connections, replicas. */
  close(): Promise<void>;
  /** Applies the tokens of a reloaded config (SIGHUP); other changes need a restart. */
  reload(config: Config): void;
}

export interface GatewayOptions {
  logger: Logger;
}

/** Per service: its config, replicas, and what the hot path looks up. */
class ServiceEntry implements ServiceRuntime {
  tokens: TokenEntry[];
  readonly forward: ReadonlySet<string>;
  readonly methods: ReadonlySet<string>;
  readonly allow: string;

  constructor(
    readonly config: ServiceConfig,
    readonly replicas: ReplicaSet,
  ) {
    this.tokens = tokenEntries(config.tokens);
    this.forward = new Set(config.forwardHeaders.filter((name) => name !== 'content-type' && name !== 'accept'));
    this.methods = new Set(config.methods);
    this.allow = config.methods.join(', ');
  }
}

const WWW_AUTHENTICATE = 'Bearer realm="sluice"';
const WWW_AUTHENTICATE_INVALID = 'Bearer realm="sluice", error="invalid_token"';
const REQUEST_SEGMENT = '/request/';
const JSON_OK = '{"status":"ok"}';
const NO_FORWARD: ReadonlySet<string> = new Set();

class GatewayServer implements Gateway, RelayObserver {
  port = 0;
  adminPort: number | undefined = undefined;

  private readonly logger: Logger;
  private readonly accessLog: AccessLog;
  private readonly metrics: Metrics;
  private readonly limiter = new AuthFailureLimiter();
  private readonly services = new Map<string, ServiceEntry>();
  private readonly prefix: string;
  private readonly app: TemplatedApp;
  private readonly adminApp: TemplatedApp | undefined;
  private listenSocket: us_listen_socket | undefined;
  private adminSocket: us_listen_socket | undefined;
  /** Request ids: a random per-process prefix and a counter, cheap and unique. */
  private readonly idPrefix = randomBytes(6).toString('hex');
  private idCounter = 0;
  private inflight = 0;
  private draining = false;
  private drained: Promise<void> | undefined;
  private idleWaiter: (() => void) | undefined;
  private closed: Promise<void> | undefined;

  constructor(
    private readonly config: Config,
    options: GatewayOptions,
  ) {
    this.logger = options.logger;
    this.accessLog = new AccessLog(options.logger);
    this.prefix = `${config.basePath}/`;
    // The app first: if it cannot be built, nothing else (replica sets, probes) has started yet.
    this.app = createApp(config.listen.tls);
    this.metrics = new Metrics(config.services.map((service) => service.slug));
    for (const service of config.services) {
      const replicas = createReplicaSet(service, { logger: this.logger, events: this.metrics });
      this.services.set(service.slug, new ServiceEntry(service, replicas));
    }
    if (config.admin === undefined) {
      this.addOpsRoutes(this.app);
    } else {
      this.adminApp = uWS.App();
      this.addOpsRoutes(this.adminApp);
      this.adminApp.any('/*', (res, req) => this.reject(res, new RelayError('not_found'), false, undefined, req.getMethod() === 'head'));
    }
    this.app.any('/*', this.handle);
  }

  async listen(): Promise<void> {
    const { host, port } = this.config.listen;
    this.listenSocket = await listenOn(this.app, host, port);
    this.port = uWS.us_socket_local_port(this.listenSocket);
    if (this.adminApp !== undefined) {
      this.adminSocket = await listenOn(this.adminApp, this.config.admin!.host, this.config.admin!.port);
      this.adminPort = uWS.us_socket_local_port(this.adminSocket);
    }
    this.logger.info(
      { host, port: this.port, adminPort: this.adminPort, basePath: this.config.basePath, services: [...this.services.keys()] },
      'gateway listening',
    );
    if (this.config.workers !== 1) {
      // workers: 0 resolves to the CPUs this process may use (the cgroup quota in a container).
      const wanted = resolveWorkers(this.config.workers);
      this.logger.warn({ workers: this.config.workers, wanted, serving: 1 }, 'workers setting not applied: one front-end thread');
    }
  }

  // ── requestFilter ──────────────────────────────────────────────────────────────────────────

  private readonly handle = (res: HttpResponse, req: HttpRequest): void => {
    const url = req.getUrl();
    // Methods are case-sensitive (RFC 9110 section 9.1): `post` is not POST. getMethod() would
    // give `post` for both.
    const method = req.getCaseSensitiveMethod();
    const head = method === 'HEAD';
    const prefix = this.prefix;
    const slash = url.startsWith(prefix) ? url.indexOf('/', prefix.length) : -1;
    const routed = slash >= 0 && url.startsWith(REQUEST_SEGMENT, slash);
    const service = routed ? this.services.get(url.slice(prefix.length, slash)) : undefined;
    // Framing and header syntax come first, whatever the route: an answer that leaves the
    // connection open must know where this request ends, or the bytes after it run as a request.
    const headers = readCallerHeaders(req, service?.forward ?? NO_FORWARD);
    const query = req.getQuery();
    const framing = checkRequestHead(headers, method, url, query);
    if (typeof framing !== 'number') {
      this.refuse(res, framing, true, service, head);
      return;
    }
    const hasBody = framing !== 0;
    if (!routed) {
      this.refuse(res, new RelayError('not_found'), hasBody, undefined, head);
      return;
    }
    if (service === undefined) {
      this.refuse(res, new RelayError('service_not_found'), hasBody, undefined, head);
      return;
    }
    if (!service.methods.has(method)) {
      this.refuse(res, new RelayError('method_not_allowed', { headers: { allow: service.allow } }), hasBody, service, head);
      return;
    }
    if (this.draining) {
      this.refuse(res, new RelayError('draining', { headers: { 'retry-after': '5' } }), true, service, head);
      return;
    }
    let address: string | undefined;
    if (!this.limiter.idle) {
      address = Buffer.from(res.getRemoteAddressAsText()).toString();
      const wait = this.limiter.blockedFor(address, Date.now());
      if (wait > 0) {
        this.refuse(res, new RelayError('too_many_requests', { headers: { 'retry-after': String(wait) } }), hasBody, service, head);
        return;
      }
    }
    const auth = headers.authorizationCount > 1 ? 'malformed' : authenticate(headers.authorization, service.tokens);
    if (typeof auth === 'string') {
      if (auth === 'malformed') {
        this.refuse(res, new RelayError('bad_request', { message: 'The Authorization header must be "Bearer <token>".' }), hasBody, service, head);
        return;
      }
      this.limiter.recordFailure(address ?? Buffer.from(res.getRemoteAddressAsText()).toString(), Date.now());
      const challenge = auth === 'missing' ? WWW_AUTHENTICATE : WWW_AUTHENTICATE_INVALID;
      this.refuse(res, new RelayError('unauthorized', { headers: { 'www-authenticate': challenge } }), hasBody, service, head);
      return;
    }
    const path = url.slice(slash + REQUEST_SEGMENT.length - 1);
    const problem = pathProblem(path) ?? (query === undefined ? undefined : queryProblem(query));
    if (problem !== undefined) {
      this.refuse(res, new RelayError('invalid_path', { message: `The request path is not allowed: ${problem}.` }), hasBody, service, head);
      return;
    }
    if (framing > service.config.maxRequestBytes) {
      const message = `The request body is larger than ${service.config.maxRequestBytes} bytes.`;
      this.refuse(res, new RelayError('payload_too_large', { message }), true, service, head);
      return;
    }
    const target = query === undefined ? path : `${path}?${query}`;
    const request = new RelayRequest(service, this, res, method, path, target, headers, framing, this.nextId(), auth.name);
    res.onAborted(request.abortHandler);
    res.onData(request.dataHandler);
    this.inflight += 1;
    this.metrics.requestStarted();
    request.start();
  };

  private nextId(): string {
    this.idCounter += 1;
    return `${this.idPrefix}-${this.idCounter.toString(36)}`;
  }

  /**
   * Refuses a request, answering on the next turn of the event loop with the response still open.
   * Answering inside the handler would let uWS go on to a request pipelined behind this one in the
   * same packet (fact 10) — and where a refused request ends may be unknown (ambiguous framing),
   * or uWS may have read it more leniently than a strict parser would (README, "Security and
   * robustness"). uWS closes a connection that pipelines a request behind an unanswered one
   * without running it, so nothing behind a refused request ever runs. A caller that sent
   * nothing more gets the answer (and the connection closes if `closeConnection`).
   */
  private refuse(res: HttpResponse, error: RelayError, closeConnection: boolean, service: ServiceEntry | undefined, head: boolean): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    setImmediate(() => {
      if (!aborted) this.reject(res, error, closeConnection, service, head);
    });
  }

  /** Answers a request refused before relaying, inside the uWS handler, and logs it. */
  private reject(res: HttpResponse, error: RelayError, closeConnection: boolean, service: ServiceEntry | undefined, head: boolean): void {
    const id = this.nextId();
    writeError(res, error, id, closeConnection, head);
    this.logger.info({ reqId: id, service: service?.config.slug, status: error.status, outcome: error.code }, 'request refused');
  }

  // ── finish ─────────────────────────────────────────────────────────────────────────────────

  onRelayFinished(r: RelayRequest): void {
    this.inflight -= 1;
    const now = performance.now();
    const d = r.downstream;
    const status = r.outcome === 'client_closed' ? 499 : d.headersSent ? d.statusCode : (r.error?.status ?? 500);
    const ttfbMs = d.firstByteAt > 0 ? d.firstByteAt - r.startedAt : -1;
    const ms = now - r.startedAt;
    this.metrics.requestFinished(r.slug, status, r.outcome, r.body.received, d.bytesOut, ttfbMs / 1000, ms / 1000);
    const failed = r.outcome !== 'ok' && r.outcome !== 'client_closed';
    if (this.accessLog.enabled(failed)) this.accessLog.write(accessLine(r, status, ttfbMs, ms), failed);
    if (this.inflight === 0 && this.idleWaiter !== undefined) this.idleWaiter();
  }

  // ── operations endpoints ───────────────────────────────────────────────────────────────────

  /**
   * The operations endpoints answer without reading a body: a request to one with ambiguous
   * framing or malformed headers is refused like a relay request, so nothing hides behind it.
   */
  private refusedOpsRequest(res: HttpResponse, req: HttpRequest, head: boolean): boolean {
    const framing = checkRequestHead(readCallerHeaders(req, NO_FORWARD), req.getCaseSensitiveMethod(), req.getUrl(), req.getQuery());
    if (framing === 0) return false;
    // A body on an operations request is not read either: answer and close.
    const error = typeof framing === 'number' ? new RelayError('bad_request', { message: 'The operations endpoints take no request body.' }) : framing;
    this.refuse(res, error, true, undefined, head);
    return true;
  }

  private addOpsRoutes(app: TemplatedApp): void {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      app.head(path, (res, req) => {
        if (this.refusedOpsRequest(res, req, true)) return;
        const status = path === '/readyz' && this.draining ? '503 Service Unavailable' : '200 OK';
        res.cork(() => res.writeStatus(status).endWithoutBody());
      });
    }
    app.get('/healthz', (res, req) => {
      if (this.refusedOpsRequest(res, req, false)) return;
      res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK));
    });
    app.get('/readyz', (res, req) => {
      if (this.refusedOpsRequest(res, req, false)) return;
      res.cork(() => {
        if (this.draining) {
          res.writeStatus('503 Service Unavailable').writeHeader('content-type', 'application/json').end('{"status":"draining"}');
        } else {
          res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON_OK);
        }
      });
    });
    app.get('/metrics', (res, req) => {
      if (this.refusedOpsRequest(res, req, false)) return;
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
      });
      this.metrics.render().then(
        (text) => {
          if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', this.metrics.contentType).end(text));
        },
        (err: unknown) => {
          this.logger.error({ err }, 'metrics failed');
          if (!aborted) res.cork(() => res.writeStatus('500 Internal Server Error').end());
        },
      );
    });
  }

  // ── drain and close ────────────────────────────────────────────────────────────────────────

  drain(): Promise<void> {
    this.drained ??= this.runDrain();
    return this.drained;
  }

  private async runDrain(): Promise<void> {
    this.draining = true;
    const started = performance.now();
    this.logger.info({ inflight: this.inflight, timeoutMs: this.config.drainTimeoutMs }, 'drain started');
    if (this.listenSocket !== undefined) uWS.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
    for (const service of this.services.values()) service.replicas.drain();
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.config.drainTimeoutMs);
        this.idleWaiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.logger.info({ inflight: this.inflight, ms: round(performance.now() - started) }, 'drain finished');
    await this.close();
  }

  close(): Promise<void> {
    this.closed ??= this.runClose();
    return this.closed;
  }

  private async runClose(): Promise<void> {
    this.draining = true;
    if (this.listenSocket !== undefined) uWS.us_listen_socket_close(this.listenSocket);
    if (this.adminSocket !== undefined) uWS.us_listen_socket_close(this.adminSocket);
    this.listenSocket = undefined;
    this.adminSocket = undefined;
    // Closing the apps aborts what is still streaming (each request logs client_closed).
    this.app.close();
    this.adminApp?.close();
    await Promise.all([...this.services.values()].map((service) => service.replicas.close()));
    this.logger.info({}, 'gateway closed');
  }

  reload(config: Config): void {
    const ignored: string[] = [];
    for (const next of config.services) {
      const service = this.services.get(next.slug);
      if (service === undefined) ignored.push(next.slug);
      else service.tokens = tokenEntries(next.tokens);
    }
    this.logger.info(
      { services: config.services.filter((s) => this.services.has(s.slug)).map((s) => s.slug), ignored },
      'tokens reloaded',
    );
  }
}

/**
 * The relay's uWS app: plain HTTP, or HTTPS with the config's certificate and key. The loader has
 * checked both files (config/tls.ts); if uWS still cannot use them (changed since, or something
 * OpenSSL refuses), the error names the keys and files instead of uWS's "App construction failed".
 * uWS reads the files once, here: a renewed certificate is served after a restart.
 */
function createApp(tls: Config['listen']['tls']): TemplatedApp {
  if (tls === undefined) return uWS.App();
  try {
    return uWS.SSLApp({ cert_file_name: tls.certFile, key_file_name: tls.keyFile });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot serve HTTPS with listen.tls.certFile ${tls.certFile} and listen.tls.keyFile ${tls.keyFile}: ${reason}`, { cause: err });
  }
}

/** `uWS.LIBUS_LISTEN_EXCLUSIVE_PORT`: exported by the module, missing from its typings. */
const EXCLUSIVE_PORT = (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

/** The four-argument listen that uWS has but its typings lack. */
type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;

function listenOn(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    // Exclusive: without it uWS sets SO_REUSEPORT, and a second gateway on the same port would
    // start and silently split the traffic instead of failing.
    (app.listen as unknown as ListenWithOptions).call(app, host, port, EXCLUSIVE_PORT, (socket) => {
      if (socket === false) reject(new Error(`cannot listen on ${host}:${port} (address in use or not available)`));
      else resolve(socket);
    });
  });
}

/** The access-log line of a finished request. */
function accessLine(r: RelayRequest, status: number, ttfbMs: number, ms: number): AccessLine {
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
    err: r.error?.cause === undefined ? undefined : describeUpstreamError(r.error.cause),
  };
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** Builds the gateway and starts listening. Rejects with a one-line reason if it cannot. */
export async function startGateway(config: Config, options: GatewayOptions): Promise<Gateway> {
  const gateway = new GatewayServer(config, options);
  try {
    await gateway.listen();
  } catch (err) {
    await gateway.close();
    throw err;
  }
  return gateway;
}
