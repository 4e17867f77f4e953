// The uWebSockets.js front end of one data plane thread: the relay route's requestFilter.
//
// requestFilter runs synchronously inside the uWS handler, cheapest check first, and nothing
// costly happens before authentication (contract section 2):
//   route → service → framing → method → draining → auth rate limit → token → path → size
// then a RelayRequest (src/relay/relay.ts) takes over.
import { randomBytes } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { ServiceConfig } from '../config-types.js';
import { RelayError } from '../errors.js';
import type { Logger } from '../log.js';
import { authenticate, type TokenEntry, tokenEntries } from '../relay/auth.js';
import { writeError } from '../relay/downstream.js';
import { readCallerHeaders, requestFraming } from '../relay/headers.js';
import { pathProblem, queryProblem } from '../relay/path.js';
import { type RelayObserver, RelayRequest, type ServiceRuntime } from '../relay/relay.js';
import type { ReplicaSet } from '../replicas/types.js';

/** Per service: its config, this thread's view of its replicas, and what the hot path looks up. */
export class ServiceEntry implements ServiceRuntime {
  tokens: TokenEntry[];
  readonly forward: ReadonlySet<string>;
  readonly methods: ReadonlySet<string>;
  readonly allow: string;

  constructor(
    readonly config: ServiceConfig,
    readonly replicas: ReplicaSet,
    /** The service's index in the config (metrics). */
    readonly index: number,
  ) {
    this.tokens = tokenEntries(config.tokens);
    this.forward = new Set(config.forwardHeaders.filter((name) => name !== 'content-type' && name !== 'accept'));
    this.methods = new Set(config.methods);
    this.allow = config.methods.join(', ');
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

/** uWS gives the method in lower case; the common ones are mapped without allocating. */
const METHODS: Record<string, string> = { post: 'POST', get: 'GET', put: 'PUT', patch: 'PATCH', delete: 'DELETE', head: 'HEAD', options: 'OPTIONS' };

function upperMethod(method: string): string {
  return METHODS[method] ?? method.toUpperCase();
}

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
    const method = upperMethod(req.getMethod());
    const head = method === 'HEAD';
    const prefix = this.prefix;
    const slash = url.startsWith(prefix) ? url.indexOf('/', prefix.length) : -1;
    if (slash < 0 || !url.startsWith(REQUEST_SEGMENT, slash)) {
      this.reject(res, new RelayError('not_found'), false, undefined, head);
      return;
    }
    const service = this.services.get(url.slice(prefix.length, slash));
    if (service === undefined) {
      this.reject(res, new RelayError('service_not_found'), false, undefined, head);
      return;
    }
    const headers = readCallerHeaders(req, service.forward);
    const framing = requestFraming(headers);
    if (typeof framing === 'string') {
      this.refuseFraming(res, new RelayError('bad_request', { message: `Invalid request framing: ${framing}.` }), service, head);
      return;
    }
    const hasBody = framing !== 0;
    if (!service.methods.has(method)) {
      this.reject(res, new RelayError('method_not_allowed', { headers: { allow: service.allow } }), hasBody, service, head);
      return;
    }
    if (this.owner.draining) {
      this.reject(res, new RelayError('draining', { headers: { 'retry-after': '5' } }), true, service, head);
      return;
    }
    let address: string | undefined;
    if (!this.limiter.idle) {
      address = Buffer.from(res.getRemoteAddressAsText()).toString();
      const wait = this.limiter.blockedFor(address, Date.now());
      if (wait > 0) {
        this.reject(res, new RelayError('too_many_requests', { headers: { 'retry-after': String(wait) } }), hasBody, service, head);
        return;
      }
    }
    const auth = headers.authorizationCount > 1 ? 'malformed' : authenticate(headers.authorization, service.tokens);
    if (typeof auth === 'string') {
      if (auth === 'malformed') {
        this.reject(res, new RelayError('bad_request', { message: 'The Authorization header must be "Bearer <token>".' }), hasBody, service, head);
        return;
      }
      this.limiter.recordFailure(address ?? Buffer.from(res.getRemoteAddressAsText()).toString(), Date.now());
      const challenge = auth === 'missing' ? WWW_AUTHENTICATE : WWW_AUTHENTICATE_INVALID;
      this.reject(res, new RelayError('unauthorized', { headers: { 'www-authenticate': challenge } }), hasBody, service, head);
      return;
    }
    const path = url.slice(slash + REQUEST_SEGMENT.length - 1);
    const query = req.getQuery();
    const problem = pathProblem(path) ?? (query === undefined ? undefined : queryProblem(query));
    if (problem !== undefined) {
      this.reject(res, new RelayError('invalid_path', { message: `The request path is not allowed: ${problem}.` }), hasBody, service, head);
      return;
    }
    if (framing > service.config.maxRequestBytes) {
      const message = `The request body is larger than ${service.config.maxRequestBytes} bytes.`;
      this.reject(res, new RelayError('payload_too_large', { message }), true, service, head);
      return;
    }
    const target = query === undefined ? path : `${path}?${query}`;
    const request = new RelayRequest(service, this.owner, res, method, path, target, headers, framing, this.nextId(), auth.name);
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
   * Refuses a request whose framing is ambiguous. Where it ends is unknown, so nothing after it on
   * the connection may run. Answering at once would let uWS go on to a request pipelined behind it
   * (fact 10); so the answer waits for the next turn of the event loop with the response still
   * open, and uWS closes a connection that pipelines a request behind an unanswered one without
   * running it. A caller that sent nothing more gets the 400, then the connection closes.
   */
  private refuseFraming(res: HttpResponse, error: RelayError, service: ServiceEntry, head: boolean): void {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    setImmediate(() => {
      if (!aborted) this.reject(res, error, true, service, head);
    });
  }

  /** Answers a request refused before relaying, inside the uWS handler, and logs it. */
  reject(res: HttpResponse, error: RelayError, closeConnection: boolean, service: ServiceEntry | undefined, head: boolean): void {
    const id = this.nextId();
    writeError(res, error, id, closeConnection, head);
    this.logger.info({ reqId: id, service: service?.config.slug, status: error.status, outcome: error.code }, 'request refused');
  }
}
