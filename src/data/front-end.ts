// The uWebSockets.js front end of one data plane thread: the relay route's requestFilter.
//
// requestFilter runs synchronously inside the uWS handler, cheapest check first, and nothing
// costly happens before authentication:
//   request head (framing, header syntax, method token, raw target: relay/request-head.ts, whatever
//   the route) → route → service → method → draining → auth rate limit → token → path → size →
//   the queue terms (`X-Sluice-Priority`, `X-Sluice-Max-Wait-Ms`) and the affinity hash
// Every refusal is answered on the next turn of the event loop (see `refuse`), but a 413 from
// a valid Content-Length, answered at once; then a RelayRequest (src/relay/relay.ts) takes over.
import { randomBytes } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { ServiceConfig } from '../config-types.js';
import { RelayError } from '../errors.js';
import type { Logger } from '../log.js';
import type { StreamCounters } from '../metrics/request-counters.js';
import { authenticate, type TokenEntry, tokenEntries } from '../relay/auth.js';
import { writeError } from '../relay/downstream.js';
import { MIN_PRIORITY } from '../config/rules.js';
import { NO_AFFINITY, hashKey } from '../replicas/affinity-ring.js';
import { readCallerHeaders, requestMaxWait, requestPriority } from '../relay/headers.js';
import { pathProblem, queryProblem } from '../relay/path.js';
import { checkRequestHead } from '../relay/caller-head-checks.js';
import { type RelayObserver, RelayRequest, type ServiceRuntime } from '../relay/relay.js';
import type { ReplicaSet } from '../replicas/types.js';

/** Per service: its config, this thread's view of its replicas, and what the hot path looks up. */
export class ServiceEntry implements ServiceRuntime {
  tokens: TokenEntry[];
  readonly forward: ReadonlySet<string>;
  readonly methods: ReadonlySet<string>;
  readonly allow: string;
  /** `routing.affinityHeader`, or '' for none. */
  readonly affinity: string;

  constructor(
    readonly config: ServiceConfig,
    readonly replicas: ReplicaSet,
    /** The service's index in the config (metrics). */
    readonly index: number,
    readonly streams: StreamCounters,
  ) {
    this.tokens = tokenEntries(config.tokens);
    this.forward = new Set(config.forwardHeaders.filter((name) => name !== 'content-type' && name !== 'accept'));
    this.methods = new Set(config.methods);
    this.allow = config.methods.join(', ');
    this.affinity = config.routing.affinityHeader ?? '';
  }
}

/** What the front end needs from the data plane that owns it. */
export interface FrontEndOwner extends RelayObserver {
  readonly draining: boolean;
  /** A request passed the filter and is about to be relayed. */
  onRelayStarted(): void;
}

const WWW_AUTHENTICATE = 'Bearer realm="sluice"';
const WWW_AUTHENTICATE_INVALID = 'Bearer realm="sluice", error="invalid_token"';
const REQUEST_SEGMENT = '/request/';
const NO_FORWARD: ReadonlySet<string> = new Set();

/** Repeated authentication failures per address (shared-auth-limiter.ts: gateway-wide). */
export interface AuthLimiter {
  readonly idle: boolean;
  blockedFor(address: string, now: number): number;
  recordFailure(address: string, now: number): void;
}

export class FrontEnd {
  private readonly prefix: string;
  /** Request ids: a random per-thread prefix and a counter, cheap and unique. */
  private readonly idPrefix = randomBytes(6).toString('hex');
  private idCounter = 0;

  constructor(
    basePath: string,
    readonly services: ReadonlyMap<string, ServiceEntry>,
    private readonly owner: FrontEndOwner,
    private readonly logger: Logger,
    private readonly limiter: AuthLimiter,
  ) {
    this.prefix = `${basePath}/`;
  }

  // ── requestFilter ──────────────────────────────────────────────────────────────────────────

  readonly handle = (res: HttpResponse, req: HttpRequest): void => {
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
    const headers = readCallerHeaders(req, service?.forward ?? NO_FORWARD, service?.affinity ?? '');
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
    if (this.owner.draining) {
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
      const error = new RelayError('payload_too_large', { message });
      // An authenticated caller declared a body over the limit: answered at once, before any of
      // it is read, and nothing of it is read after (the socket is paused; `Connection: close`):
      // uWS's idle timer closes the connection about 10 s later. Closing at once would reset the
      // connection with the caller's bytes unread, and the reset can destroy the 413 before a
      // caller still writing reads it; reading the body through has no end but the caller's
      // (CallerBody.endUpload).
      const id = this.nextId();
      res.pause();
      writeError(res, error, id, 'closeLater', head);
      this.logRefusal(id, error, service);
      return;
    }
    const priority = requestPriority(headers, auth.priority, MIN_PRIORITY);
    const maxWaitMs = requestMaxWait(headers, service.config.queue.maxWaitMs);
    if (typeof priority === 'string' || typeof maxWaitMs === 'string') {
      const problem = typeof priority === 'string' ? priority : (maxWaitMs as string);
      this.refuse(res, new RelayError('bad_request', { message: `${problem}.` }), hasBody, service, head);
      return;
    }
    const affinity = headers.affinity === undefined ? NO_AFFINITY : hashKey(headers.affinity);
    const target = query === undefined ? path : `${path}?${query}`;
    const request = new RelayRequest(service, this.owner, res, method, path, target, headers, framing, this.nextId(), auth.name, priority, maxWaitMs, affinity);
    res.onAborted(request.abortHandler);
    res.onData(request.dataHandler);
    this.owner.onRelayStarted();
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
  refuse(res: HttpResponse, error: RelayError, closeConnection: boolean, service: ServiceEntry | undefined, head: boolean): void {
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
    writeError(res, error, id, closeConnection ? 'close' : 'keep', head);
    this.logRefusal(id, error, service);
  }

  private logRefusal(id: string, error: RelayError, service: ServiceEntry | undefined): void {
    this.logger.info({ reqId: id, service: service?.config.slug, status: error.status, outcome: error.code }, 'request refused');
  }
}
