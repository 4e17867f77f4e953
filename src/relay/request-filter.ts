// The first step of a relayed request: the caller's request, accepted or refused, in the uWS
// handler of the relay route (one per data plane thread).
//
// It runs synchronously inside the handler, cheapest check first, and nothing costly happens
// before authentication:
//   request head (framing, header syntax, method token, raw target: caller-head-checks.ts,
//   whatever the route) → route → service (or router: model-router.ts) → method → draining →
//   auth rate limit → token → path → size → the queue terms (`X-Sluice-Priority`,
//   `X-Sluice-Max-Wait-Ms`) and the affinity hash
// Every refusal is answered on the next turn of the event loop (refusal.ts), but a 413 from a
// valid Content-Length, answered at once; then a RelayRequest (relay.ts) takes over.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { LimitsConfig, PrefixConfig, ServiceConfig, TokenConfig } from '../config/types.js';
import { drainingError, RelayError } from '../http/errors.js';
import type { StreamCounters } from '../metrics/request-counters.js';
import type { TokenUsage } from '../metrics/token-usage.js';
import { MIN_PRIORITY } from '../config/rules.js';
import { NO_AFFINITY, hashKey } from '../replicas/affinity-ring.js';
import type { ReplicaSet } from './replica-set.js';
import { authenticate, heldElsewhere, type TokenEntry, tokenEntries, WWW_AUTHENTICATE, WWW_AUTHENTICATE_INVALID } from './request/auth.js';
import { BodyFields } from './body/body-fields.js';
import { createsResponse, isStatePath, pathStateId } from './body/state-ref.js';
import { PromptBlocks } from './body/prompt-blocks.js';
import { checkRequestHead } from './request/caller-head-checks.js';
import { type CallerHeaders, readCallerHeaders, requestKeepAlive, requestMaxWait, requestPriority } from './request/headers.js';
import { pathProblem } from './request/path.js';
import type { Refusals } from './request/refusal.js';
import { type RelayObserver, RelayRequest } from './relay.js';
import type { RequestIds } from './request/request-ids.js';
import { HeldBodies } from './body/held-bodies.js';
import type { LimitTable } from '../limits/limit-table.js';
import { admitted, refusedByLimits, waitForLimits } from './request/request-limits.js';
import { answerModels, MODEL_LIST_PATH, ModelRouter, type RoutedService } from './model-router.js';
import { ROUTER_MODEL_BYTES } from '../tunables.js';
import { asksForWebSocket } from './session/handshake.js';
import type { Tracer } from '../tracing/tracer.js';

/** Per service: its config, this thread's view of its replicas, and what the hot path looks up. */
export class ServiceEntry implements RoutedService {
  tokens: TokenEntry[];
  readonly forward: ReadonlySet<string>;
  readonly methods: ReadonlySet<string>;
  readonly allow: string;
  /** `routing.affinityHeader`, or '' for none. */
  readonly affinity: string;
  readonly prefix: PrefixConfig | undefined;
  readonly held: HeldBodies;

  constructor(
    readonly config: ServiceConfig,
    readonly replicas: ReplicaSet,
    /** The service's index in the config (metrics). */
    readonly index: number,
    readonly streams: StreamCounters,
    readonly limitTable: LimitTable,
    /** Each token's cell set in the limit table, or -1 (the control plane's assignment). */
    cells: readonly number[],
    /** This thread's LLM token usage counts (every service's). */
    readonly usage: TokenUsage,
  ) {
    this.tokens = this.entries(config.tokens, config.limits, cells);
    this.forward = new Set(config.forwardHeaders.filter((name) => name !== 'content-type' && name !== 'accept'));
    this.methods = new Set(config.methods);
    this.allow = config.methods.join(', ');
    this.affinity = config.routing.affinityHeader ?? '';
    this.prefix = config.routing.prefix;
    this.held = new HeldBodies(config);
  }

  /** The token table of `tokens` (at start and on reload): each token with its limits' cells and its usage place. */
  entries(tokens: readonly TokenConfig[], limits: LimitsConfig | undefined, cells: readonly number[]): TokenEntry[] {
    return tokenEntries(tokens, limits, cells, this.limitTable, (name) => this.usage.place(this.index, name));
  }
}

/** What the request filter needs from the data plane that owns it. */
export interface RequestFilterOwner extends RelayObserver {
  readonly draining: boolean;
  /** A request passed the filter and is about to be relayed. */
  onRelayStarted(): void;
}

const REQUEST_SEGMENT = '/request/';
const NO_FORWARD: ReadonlySet<string> = new Set();

/**
 * Repeated authentication failures per caller (shared-auth-limiter.ts: gateway-wide), by the
 * binary peer address uWS gives (`getRemoteAddress`: 4 or 16 bytes).
 */
export interface AuthLimiter {
  readonly idle: boolean;
  blockedFor(address: ArrayBuffer, now: number): number;
  recordFailure(address: ArrayBuffer, now: number): void;
}

export class RequestFilter {
  private readonly prefix: string;
  /** This thread's tracing, while it is on (the data plane sets it, at start and on reload). */
  tracer: Tracer | undefined = undefined;

  constructor(
    basePath: string,
    readonly services: ReadonlyMap<string, ServiceEntry>,
    /** The routers by slug (replaced whole on a reload). */
    public routers: ReadonlyMap<string, ModelRouter>,
    private readonly owner: RequestFilterOwner,
    private readonly limiter: AuthLimiter,
    private readonly ids: RequestIds,
    private readonly refusals: Refusals,
  ) {
    this.prefix = `${basePath}/`;
  }

  /** The uWS handler of the relay route. */
  readonly handle = (res: HttpResponse, req: HttpRequest): void => {
    const url = req.getUrl();
    // Methods are case-sensitive (RFC 9110 section 9.1): `post` is not POST. getMethod() would
    // give `post` for both.
    const method = req.getCaseSensitiveMethod();
    const head = method === 'HEAD';
    const prefix = this.prefix;
    const slash = url.startsWith(prefix) ? url.indexOf('/', prefix.length) : -1;
    const routed = slash >= 0 && url.startsWith(REQUEST_SEGMENT, slash);
    const name = routed ? url.slice(prefix.length, slash) : '';
    // A router (model-router.ts) is looked for only when no service has the slug.
    const service = routed ? (this.services.get(name) ?? this.routers.get(name)) : undefined;
    // Framing and header syntax come first, whatever the route: an answer that leaves the
    // connection open must know where this request ends, or the bytes after it run as a request.
    const headers = readCallerHeaders(req, service?.forward ?? NO_FORWARD, service?.affinity ?? '');
    const query = req.getQuery();
    const framing = checkRequestHead(headers, method, url, query);
    if (typeof framing !== 'number') {
      this.refuse(res, framing, true, service, head, method, url, headers);
      return;
    }
    const hasBody = framing !== 0;
    if (!routed) {
      this.refuse(res, new RelayError('not_found'), hasBody, undefined, head, method, url, headers);
      return;
    }
    if (service === undefined) {
      this.refuse(res, new RelayError('service_not_found'), hasBody, undefined, head, method, url, headers);
      return;
    }
    if (method === 'GET' && asksForWebSocket(req)) {
      // A WebSocket handshake the session route (session/session-filter.ts) did not take: its key is not 24 characters.
      this.refuse(res, new RelayError('bad_request', { message: 'Invalid WebSocket handshake: Sec-WebSocket-Key must be 16 bytes in base64.' }), true, service, head, method, url, headers);
      return;
    }
    if (!service.methods.has(method)) {
      this.refuse(res, new RelayError('method_not_allowed', { headers: { allow: service.allow } }), hasBody, service, head, method, url, headers);
      return;
    }
    if (this.owner.draining) {
      this.refuse(res, drainingError(), true, service, head, method, url, headers);
      return;
    }
    let address: ArrayBuffer | undefined;
    if (!this.limiter.idle) {
      address = res.getRemoteAddress();
      const wait = this.limiter.blockedFor(address, Date.now());
      if (wait > 0) {
        this.refuse(res, new RelayError('too_many_requests', { headers: { 'retry-after': String(wait) } }), hasBody, service, head, method, url, headers);
        return;
      }
    }
    const auth = headers.authorizationCount > 1 ? 'malformed' : authenticate(headers.authorization, service.tokens);
    if (typeof auth === 'string') {
      if (auth === 'malformed') {
        this.refuse(res, new RelayError('bad_request', { message: 'The Authorization header must be "Bearer <token>".' }), hasBody, service, head, method, url, headers);
        return;
      }
      this.limiter.recordFailure(address ?? res.getRemoteAddress(), Date.now());
      const challenge = auth === 'missing' ? WWW_AUTHENTICATE : WWW_AUTHENTICATE_INVALID;
      const message = auth === 'invalid' ? this.otherKind(headers.authorization!, service) : undefined;
      this.refuse(res, new RelayError('unauthorized', { message, headers: { 'www-authenticate': challenge } }), hasBody, service, head, method, url, headers);
      return;
    }
    const path = url.slice(slash + REQUEST_SEGMENT.length - 1);
    if (method === 'GET' && service instanceof ModelRouter) {
      // Answered here, never forwarded: a model id may hold an encoded slash (`org%2Fmodel`, as the SDKs send it).
      const one = path === MODEL_LIST_PATH ? undefined : service.retrieved(path, auth);
      if (one instanceof RelayError) this.refuse(res, one, hasBody, service, head, method, url, headers, auth.name);
      else if (path === MODEL_LIST_PATH || one !== undefined) answerModels(res, service, auth, one, this.ids.next(), hasBody);
      else this.refuse(res, new RelayError('method_not_allowed', { message: `A router answers GET only at ${MODEL_LIST_PATH} and ${MODEL_LIST_PATH}/{model}.`, headers: { allow: 'POST' } }), hasBody, service, head, method, url, headers, auth.name);
      return;
    }
    // The query was checked with the whole head (caller-head-checks.ts).
    const problem = pathProblem(path);
    if (problem !== undefined) {
      this.refuse(res, new RelayError('invalid_path', { message: `The request path is not allowed: ${problem}.` }), hasBody, service, head, method, url, headers, auth.name);
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
      res.pause();
      if (this.tracer !== undefined) this.traceRefusal(this.tracer, error, service, method, url, headers, auth.name);
      this.refusals.answer(res, error, 'closeLater', service.config.slug, head);
      return;
    }
    const priority = requestPriority(headers, auth.priority, MIN_PRIORITY);
    const maxWaitMs = requestMaxWait(headers, service.config.queue.maxWaitMs);
    const keepAliveMs = requestKeepAlive(headers);
    if (typeof priority === 'string' || typeof maxWaitMs === 'string' || typeof keepAliveMs === 'string') {
      const problem = typeof priority === 'string' ? priority : typeof maxWaitMs === 'string' ? maxWaitMs : (keepAliveMs as string);
      this.refuse(res, new RelayError('bad_request', { message: `${problem}.` }), hasBody, service, head, method, url, headers, auth.name);
      return;
    }
    // An empty value names no session: the request is routed as one without the header.
    const affinity = headers.affinity === undefined || headers.affinity === '' ? NO_AFFINITY : hashKey(headers.affinity);
    // Limits per caller: the last check, so that a request refused for anything else uses none of
    // them. A token with a limit of tokens is admitted once its body says its reservation (only a
    // window already full refuses it now).
    const limit = auth.limit;
    const byBody = limit !== undefined && limit.cap !== 0;
    const verdict = limit === undefined ? undefined : byBody ? service.limitTable.precheck(limit) : service.limitTable.admit(limit);
    if (verdict !== undefined && verdict !== 'wait') {
      const error = refusedByLimits(verdict, service.limitTable, limit!, auth.name);
      this.refuse(res, error, hasBody, service, head, method, url, headers, auth.name);
      return;
    }
    const target = query === undefined ? path : `${path}?${query}`;
    const request = new RelayRequest(service, this.owner, res, method, path, target, headers, framing, this.ids.next(), auth, priority, maxWaitMs, affinity, keepAliveMs);
    res.onAborted(request.abortHandler);
    res.onData(request.dataHandler);
    const router = service instanceof ModelRouter;
    if (router) {
      request.router = service;
      request.routedBy = service.config.slug;
    }
    if (isStatePath(path)) {
      // The Responses and Conversations APIs: the stored state named goes where it is (state-ref.ts).
      request.learnsState = true;
      if (method === 'POST' && createsResponse(path)) request.awaitsState = true;
      else if (!router) request.stateId = pathStateId(path);
    }
    const prompt = service.prefix;
    if (router || byBody || request.awaitsState || (prompt !== undefined && hasBody)) {
      // Its body's fields are read as it arrives, its first part held (body-fields.ts); with
      // prefix-aware routing its prompt's blocks too, and a service's request starts once they are.
      request.fields = new BodyFields(prompt === undefined ? undefined : new PromptBlocks(prompt.blockBytes, prompt.maxBlocks));
      request.body.read(request.fields, ROUTER_MODEL_BYTES);
      if (prompt !== undefined && !router) request.waitsForPrompt = true;
    }
    const tracer = this.tracer;
    if (tracer !== undefined) traced(tracer, request, headers, path);
    this.owner.onRelayStarted();
    if (byBody) request.admitting = 'body';
    else if (verdict === 'wait') {
      // The shared store's lease ran out: up to 50 ms for the control plane's top-up (request-limits.ts).
      waitForLimits(request, service.limitTable, limit!);
      return;
    } else if (limit !== undefined) admitted(request, limit, service.limitTable);
    request.start();
  };

  /**
   * The message of the 401 of a token that `endpoint` does not have but one of the other kind has (a
   * router's token sent to a service, a service's to a router), naming neither; else undefined (the
   * usual message).
   */
  private otherKind(authorization: string, endpoint: ServiceEntry | ModelRouter): string | undefined {
    if (endpoint instanceof ModelRouter) {
      if (heldElsewhere(authorization, tablesOf(this.services))) return OTHER_KIND.service;
    } else if (heldElsewhere(authorization, tablesOf(this.routers))) return OTHER_KIND.router;
    return undefined;
  }

  /** A refusal before the relay: answered (refusal.ts), and traced when tracing is on and it is sampled (`token`: its name once authenticated). */
  private refuse(res: HttpResponse, error: RelayError, closeConnection: boolean, service: ServiceEntry | ModelRouter | undefined, head: boolean, method: string, url: string, headers: CallerHeaders, token = ''): void {
    if (this.tracer !== undefined) this.traceRefusal(this.tracer, error, service, method, url, headers, token);
    this.refusals.refuse(res, error, closeConnection, service?.config.slug, head);
  }

  /**
   * A request refused before it became a relayed one, traced when it is sampled: its SERVER span
   * (with `error.type`), and the admission that refused it when its token's limits did. A request
   * that names no service or router has no route: its span is named by its method alone.
   */
  private traceRefusal(tracer: Tracer, error: RelayError, service: ServiceEntry | ModelRouter | undefined, method: string, url: string, headers: CallerHeaders, token: string): void {
    const prefix = this.prefix;
    const slash = url.startsWith(prefix) ? url.indexOf('/', prefix.length) : -1;
    const routed = service !== undefined && slash >= 0 && url.startsWith(REQUEST_SEGMENT, slash);
    const router = service instanceof ModelRouter ? service.config.slug : undefined;
    const slug = service === undefined || router !== undefined ? '' : service.config.slug;
    // Without a route, `url.path` is the whole path as received, not the part after a service's prefix.
    const path = routed ? url.slice(slash + REQUEST_SEGMENT.length - 1) : url;
    const request = { method, path, slug, routedBy: router, routed, requestId: '', token: { name: token }, priority: 0, error };
    tracer.refused(request, error.status, headers.traceparent, headers.tracestate, performance.now());
  }
}

/** The 401's message for a token of the other kind (docs/api.md#routers). */
const OTHER_KIND = {
  service: "This is a service's token, not a token of this router: send the request to the service's own endpoint, or use a token of the router.",
  router: "This is a router's token: send the request to the router's endpoint ({basePath}/{router}/request…), which chooses the service by the body's \"model\".",
} as const;

function* tablesOf(endpoints: ReadonlyMap<string, { readonly tokens: readonly TokenEntry[] }>): Iterable<readonly TokenEntry[]> {
  for (const endpoint of endpoints.values()) yield endpoint.tokens;
}

/**
 * Tracing is on: a sampled request gets its span recorder (tracing/request-trace.ts), and one that
 * is OpenAI-style and whose body Sluice does not read otherwise has it walked as it passes, for the
 * model and the budget its spans name (not held: the walk decides nothing).
 */
function traced(tracer: Tracer, request: RelayRequest, headers: CallerHeaders, path: string): void {
  const trace = tracer.begin(headers.traceparent, headers.tracestate, request.startedAt, path);
  if (trace === undefined) return;
  request.trace = trace;
  if (trace.operation !== undefined && request.fields === undefined) request.body.watch((trace.fields = new BodyFields()));
}
