// The first step of a realtime session (docs/api.md#realtime-sessions): the caller's WebSocket
// handshake accepted or refused in uWS's upgrade handler, with the checks of a request in the same
// order (request-filter.ts) and the same answers: the head, the route, the service or router (a
// router's model from the `model` query parameter), draining, the authentication rate limit, the
// token (Authorization, or the `openai-insecure-api-key.` subprotocol: handshake.ts), the path, the
// queue terms, the token's limits. A refusal is an HTTP answer on the next turn (refusal.ts); an
// accepted handshake becomes a RelaySession, which waits for a replica before it answers `101`.
//
// uWS routes a GET with a 24-character Sec-WebSocket-Key here; one without `Upgrade: websocket` is
// handed on to the HTTP route (`setYield`), and one with a shorter or longer key never comes here:
// the HTTP route refuses it (request-filter.ts, `asksForWebSocket`). The HTTP route pays nothing
// for this one.
import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocketBehavior } from 'uWebSockets.js';
import { drainingError, RelayError } from '../../http/errors.js';
import { MIN_PRIORITY } from '../../config/rules.js';
import { NO_AFFINITY, hashKey } from '../../replicas/affinity-ring.js';
import { authenticate, type TokenEntry, WWW_AUTHENTICATE, WWW_AUTHENTICATE_INVALID } from '../request/auth.js';
import { checkRequestHead } from '../request/caller-head-checks.js';
import { type CallerHeaders, readCallerHeaders, requestMaxWait, requestPriority } from '../request/headers.js';
import { pathProblem } from '../request/path.js';
import type { Refusals } from '../request/refusal.js';
import type { RequestIds } from '../request/request-ids.js';
import { admitted, refusedByLimits, waitForLimits } from '../request/request-limits.js';
import { ModelRouter, type RoutedService, routedTerms } from '../model-router.js';
import type { AuthLimiter, RequestFilter } from '../request-filter.js';
import { readHandshake } from './handshake.js';
import { RelaySession, type SessionHolder, type SessionObserver } from './relay-session.js';

const REQUEST_SEGMENT = '/request/';
const NO_FORWARD: ReadonlySet<string> = new Set();
/** Below this many bytes buffered for a caller, uWS calls `drain` (relay-session.ts reads the replica again). */
const FRONT_BACKLOG_SLACK = 1024 * 1024;

/** What the session filter needs from the data plane that owns it. */
export interface SessionFilterOwner extends SessionObserver {
  readonly draining: boolean;
  /** A session passed the filter: one request in flight until it is finished. */
  onSessionStarted(): void;
}

export class SessionFilter {
  private readonly prefix: string;

  constructor(
    basePath: string,
    /** The HTTP route's filter: its services and routers as they are now (a reload replaces the routers). */
    private readonly requests: RequestFilter,
    private readonly owner: SessionFilterOwner,
    private readonly limiter: AuthLimiter,
    private readonly ids: RequestIds,
    private readonly refusals: Refusals,
  ) {
    this.prefix = `${basePath}/`;
  }

  /**
   * The uWS WebSocket route over `{basePath}/*`: messages up to twice the largest
   * `sessions.maxMessageBytes` reach the session, which closes a session over its service's own
   * limit with `1009` (uWS cuts a connection whose message is larger than what it takes, without a
   * close frame). No compression, no automatic pings, no uWS idle timer: the session's time-outs are
   * the service's (open-sessions.ts ticks them).
   */
  addRoute(app: TemplatedApp, basePath: string, largestMessage: number): void {
    // uWS copies the own properties of the user data it is given: the session goes in a holder.
    const behavior: WebSocketBehavior<SessionHolder> = {
      maxPayloadLength: 2 * largestMessage,
      maxBackpressure: 2 * largestMessage + FRONT_BACKLOG_SLACK,
      closeOnBackpressureLimit: false,
      idleTimeout: 0,
      sendPingsAutomatically: false,
      upgrade: this.upgrade,
      open: (ws) => ws.getUserData().session.onCallerOpen(ws),
      message: (ws, message, binary) => ws.getUserData().session.onCallerMessage(message, binary),
      drain: (ws) => ws.getUserData().session.onCallerDrain(),
      close: (ws, code, reason) => ws.getUserData().session.onCallerClose(code, reason),
    };
    app.ws(`${basePath}/*`, behavior);
  }

  /** uWS's upgrade handler of the WebSocket route. */
  private readonly upgrade = (res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void => {
    const handshake = readHandshake(req);
    if (handshake === undefined) {
      req.setYield(true);
      return;
    }
    const url = req.getUrl();
    const prefix = this.prefix;
    const slash = url.startsWith(prefix) ? url.indexOf('/', prefix.length) : -1;
    const routed = slash >= 0 && url.startsWith(REQUEST_SEGMENT, slash);
    const name = routed ? url.slice(prefix.length, slash) : '';
    const service = routed ? (this.requests.services.get(name) ?? this.requests.routers.get(name)) : undefined;
    const headers = readCallerHeaders(req, service?.forward ?? NO_FORWARD, service?.affinity ?? '');
    const query = req.getQuery();
    const framing = checkRequestHead(headers, 'GET', url, query);
    const slug = service?.config.slug;
    if (typeof framing !== 'number' || framing !== 0) {
      this.refuse(res, typeof framing !== 'number' ? framing : new RelayError('bad_request', { message: 'A WebSocket handshake has no body.' }), slug);
      return;
    }
    if (typeof handshake === 'string') {
      const version = handshake.startsWith('Sec-WebSocket-Version') ? { 'sec-websocket-version': '13' } : undefined;
      this.refuse(res, new RelayError('bad_request', { message: `Invalid WebSocket handshake: ${handshake}.`, ...(version === undefined ? {} : { headers: version }) }), slug);
      return;
    }
    if (!routed || service === undefined) {
      this.refuse(res, new RelayError(routed ? 'service_not_found' : 'not_found'), slug);
      return;
    }
    if (this.owner.draining) {
      this.refuse(res, drainingError(), slug);
      return;
    }
    let address: ArrayBuffer | undefined;
    if (!this.limiter.idle) {
      address = res.getRemoteAddress();
      const wait = this.limiter.blockedFor(address, Date.now());
      if (wait > 0) {
        this.refuse(res, new RelayError('too_many_requests', { headers: { 'retry-after': String(wait) } }), slug);
        return;
      }
    }
    const both = handshake.authorization !== undefined && headers.authorizationCount > 0;
    const credentials = handshake.authorization ?? headers.authorization;
    const auth = both || headers.authorizationCount > 1 ? 'malformed' : authenticate(credentials, service.tokens);
    if (typeof auth === 'string') {
      if (auth === 'malformed') {
        const message = both ? 'A session authenticates by the Authorization header or by the openai-insecure-api-key subprotocol, not both.' : 'The Authorization header must be "Bearer <token>".';
        this.refuse(res, new RelayError('bad_request', { message }), slug);
        return;
      }
      this.limiter.recordFailure(address ?? res.getRemoteAddress(), Date.now());
      this.refuse(res, new RelayError('unauthorized', { headers: { 'www-authenticate': auth === 'missing' ? WWW_AUTHENTICATE : WWW_AUTHENTICATE_INVALID } }), slug);
      return;
    }
    const path = url.slice(slash + REQUEST_SEGMENT.length - 1);
    const problem = pathProblem(path);
    if (problem !== undefined) {
      this.refuse(res, new RelayError('invalid_path', { message: `The request path is not allowed: ${problem}.` }), slug);
      return;
    }
    const target = sessionService(service, query, headers, auth);
    if (target instanceof RelayError) {
      this.refuse(res, target, slug);
      return;
    }
    const priority = requestPriority(headers, auth.priority, MIN_PRIORITY);
    const maxWaitMs = requestMaxWait(headers, service.config.queue.maxWaitMs);
    if (typeof priority === 'string' || typeof maxWaitMs === 'string') {
      this.refuse(res, new RelayError('bad_request', { message: `${typeof priority === 'string' ? priority : (maxWaitMs as string)}.` }), slug);
      return;
    }
    // Limits per caller, last: a session is one request (requestsPerMinute, concurrent for its whole
    // life); with tokensPerMinute it reserves nothing and settles with the usage its events report.
    const limit = auth.limit;
    const verdict = limit === undefined ? undefined : service.limitTable.admit(limit);
    if (verdict !== undefined && verdict !== 'wait') {
      this.refuse(res, refusedByLimits(verdict, service.limitTable, limit!, auth.name), slug);
      return;
    }
    const terms = target.terms ?? { maxWaitMs, affinity: headers.affinity === undefined || headers.affinity === '' ? NO_AFFINITY : hashKey(headers.affinity) };
    const requestId = this.ids.next();
    const session = new RelaySession(
      target.service,
      this.owner,
      { res, context, key: handshake.key, protocols: handshake.protocols },
      query === undefined ? path : `${path}?${query}`,
      path,
      replicaHeaders(headers, requestId),
      requestId,
      auth,
      priority,
      terms.maxWaitMs,
      terms.affinity,
      service instanceof ModelRouter ? service.config.slug : undefined,
    );
    res.onAborted(session.abortHandler);
    this.owner.onSessionStarted();
    if (verdict === 'wait') {
      waitForLimits(session, service.limitTable, limit!);
      return;
    }
    if (limit !== undefined) admitted(session, limit, service.limitTable);
    session.start();
  };

  private refuse(res: HttpResponse, error: RelayError, slug: string | undefined): void {
    this.refusals.refuse(res, error, true, slug, false);
  }
}

/**
 * The service a session goes to: a service's own, or on a router the one serving the model its
 * `model` query parameter names (as OpenAI's Realtime URL carries it), with its queue terms.
 */
function sessionService(service: RoutedService | ModelRouter, query: string | undefined, headers: CallerHeaders, token: TokenEntry): { service: RoutedService; terms?: { maxWaitMs: number; affinity: number } } | RelayError {
  if (!(service instanceof ModelRouter)) return { service };
  const models = new URLSearchParams(query ?? '').getAll('model');
  if (models.length !== 1 || models[0] === '') {
    return new RelayError('bad_request', { message: `A session on a router names its model in one "model" query parameter${models.length > 1 ? ', not more' : ''}.` });
  }
  const routed = service.serviceOf(models[0]!, token);
  if (routed instanceof RelayError) return routed;
  return { service: routed, terms: routedTerms(routed, headers) };
}

/** The headers the replica's handshake gets besides its own: the request id, trace context, `forwardHeaders`. */
function replicaHeaders(h: CallerHeaders, requestId: string): Record<string, string> {
  const out: Record<string, string> = { 'x-request-id': requestId };
  if (h.traceparent !== undefined) out['traceparent'] = h.traceparent;
  if (h.tracestate !== undefined) out['tracestate'] = h.tracestate;
  const forwarded = h.forwarded;
  if (forwarded !== undefined) for (let i = 0; i < forwarded.length; i += 2) out[forwarded[i]!] = out[forwarded[i]!] === undefined ? forwarded[i + 1]! : `${out[forwarded[i]!]}, ${forwarded[i + 1]!}`;
  return out;
}
