// One relayed request, from the moment it passed the request filter (request-filter.ts) to its
// record (finished-request.ts).
//
// Phases, in order (each one line):
//   read             — a router's request, or a token's with tokensPerMinute: once its body's first
//                      part is in, its fields (body-fields.ts): the model's service (model-router.ts),
//                      the admission with its reservation (request-limits.ts)
//   acquire          — ask the service's replica set for a replica; maybe wait in its queue
//   upstreamRequest  — build the replica's request: path, allowed headers, framing, body
//   dispatch         — ask the replica's connection pool for a connection, with this object as
//                      handler; once it is ready, write the request head and body to it
//   upstreamResponse — status and what the caller gets of the head (response-headers.ts) →
//                      downstream, then each chunk, with backpressure both ways; the events
//                      of an event stream are timed as they pass (stream-timing.ts), and the
//                      LLM token usage of a stream or a JSON answer found (answer-usage.ts)
//   finish           — release the replica, count, log; and the other ways a request ends (a
//                      failed exchange, its one retry, a body too large, the caller gone):
//                      request-state.ts, the class this one extends, off the per-chunk path
// Meanwhile, for a service with `queue.keepAliveMs`, a request for a stream that is still waiting
// for the replica's answer gets `200` and comments (waiting-comments.ts).
//
// One object per request plays every role (replica waiter, upstream handler, body and writer
// listener, keep-alive tick), so the hot path allocates no closures beyond the two uWS callbacks;
// its state and cold paths are declared in request-state.ts, the request's path in order here.
import type { HttpResponse } from 'uWebSockets.js';
import { RelayError } from '../http/errors.js';
import type { Replica, ReplicaWaiter } from './replica-set.js';
import type { UpstreamExchange, UpstreamHandler } from '../upstream/handler.js';
import type { TokenEntry } from './request/auth.js';
import { answerUsage } from './answer/answer-usage.js';
import { AnswerStateIds } from './answer/answer-state-ids.js';
import { requestHead } from './replica-request-head.js';
import { bodylessAnswer, returnField, type ReturnedFields } from './answer/response-headers.js';
import type { CallerBodyListener } from './body/caller-body.js';
import type { DownstreamListener } from './answer/downstream.js';
import type { CallerHeaders } from './request/headers.js';
import type { ServiceRuntime } from './service-runtime.js';
import { AnswerAsError, asksForStreamedAnswer, continuesStream, type KeptAlive, keepAliveWhileWaiting, stopKeepingAlive, waitingComment } from './answer/waiting-comments.js';
import { isEventStream } from './answer/sse-events.js';
import { StreamFlag } from './body/stream-request.js';
import { StreamTiming } from './answer/stream-timing.js';
import type { TokenLimit } from '../limits/limit-table.js';
import type { BodyFields } from './body/body-fields.js';
import { type ModelRouter, routedTerms } from './model-router.js';
import { admitByBody } from './request/request-limits.js';
import { RequestState, type RelayOwner } from './request-state.js';

/** Told once per request, when it is over. */
export interface RelayObserver extends RelayOwner {
  onRelayFinished(request: RelayRequest): void;
}

export class RelayRequest extends RequestState implements ReplicaWaiter, UpstreamHandler, CallerBodyListener, DownstreamListener, KeptAlive, ReturnedFields {
  declare protected readonly observer: RelayObserver;
  readonly startedAt = performance.now();
  /** The replica's Content-Type, as the current attempt's head reports it (response-headers.ts). */
  answerContentType: string | undefined = undefined;
  /** Kept alive while waiting (`queue.keepAliveMs`): when the next tick sends `200` or a comment. */
  private keepAliveAt = 0;
  /** The walk over the body for its `stream` key, from the first look on (kept alive while waiting). */
  private streamFlag: StreamFlag | undefined = undefined;
  /** After keep-alive comments, a replica's answer that cannot follow them: it becomes an error event. */
  private asError: AnswerAsError | undefined = undefined;

  /** Its token's limits once it was admitted by them (ended once, by the data plane), else undefined. */
  limit: TokenLimit | undefined = undefined;
  /** The tokens it reserved of tokensPerMinute (its body's max_tokens), taken with its admission. */
  reserved = 0;
  /**
   * Not admitted by its token's limits yet (it starts once it is): `store` while it waits for the
   * shared store's top-up, `body` until its body's first part is in (a token with tokensPerMinute).
   */
  admitting: 'no' | 'store' | 'body' = 'no';
  /** Sent to a router: the router until the body names the model, then undefined. */
  router: ModelRouter | undefined = undefined;
  /** The fields read out of its body as it arrives (a router's request, a token's with tokensPerMinute). */
  fields: BodyFields | undefined = undefined;
  /** Sent to a router: its slug (the access line's `router`). */
  routedBy: string | undefined = undefined;
  /** The id of the stored state it names (state-ref.ts), taken where that state is; undefined: none. */
  stateId: string | undefined = undefined;
  /** A request that creates a response: it starts once its body says which stored state it names. */
  awaitsState = false;
  /** To the Responses or Conversations API: the ids its answer gives are learned (answer-state-ids.ts). */
  learnsState = false;
  private stateIds: AnswerStateIds | undefined = undefined;
  /** Its service routes by prompt prefix (`routing.prefix`): it starts once its body's first part gave its blocks. */
  waitsForPrompt = false;
  /** Its prompt's chained block hashes (body/prompt-blocks.ts), read with its fields; undefined: none. */
  prefix: Int32Array | undefined = undefined;

  /** uWS callback (with request-state.ts's `abortHandler`): bound once per request. */
  readonly dataHandler = (data: ArrayBuffer, isLast: boolean): void => this.body.onData(data, isLast);

  constructor(
    /** Its service; a router's request has its router here until it is routed (`routeByModel`). */
    service: ServiceRuntime,
    observer: RelayObserver,
    res: HttpResponse,
    method: string,
    /** `{path}` as received, never decoded. */
    readonly path: string,
    /** `{path}?{query}` as received: the replica's request target. */
    private readonly target: string,
    private readonly headers: CallerHeaders,
    /** From the framing: bytes, or -1 for a chunked body. */
    bodyLength: number,
    requestId: string,
    /** The token that authenticated the request (as it is after a reload, once admitted: auth.ts `currentEntry`). */
    public token: TokenEntry,
    /** Its place in the queue (the token's priority, or lower as the caller asked). */
    readonly priority: number,
    /** Its own wait for a replica (`X-Sluice-Max-Wait-Ms`), or -1: the service's. */
    public maxWaitMs: number,
    /** The hash of its affinity header's value, or -1. */
    public affinity: number,
    /** How long it asks its replica to stay loaded after it (`X-Sluice-Keep-Alive`), in ms; 0: not asked. */
    readonly keepAliveMs: number,
  ) {
    super(service, observer, res, method, bodyLength, requestId);
  }

  get slug(): string {
    return this.service.config.slug;
  }

  // ── acquire ────────────────────────────────────────────────────────────────────────────────

  /**
   * Runs inside the uWS handler, after `onAborted` and `onData` were attached; a router's request
   * once routed, and a request admitted later than that once admitted (whichever comes last).
   */
  start(): void {
    if (this.router !== undefined || this.admitting !== 'no' || this.awaitsState || this.waitsForPrompt) return;
    if (this.trace !== undefined) this.trace.admitted(performance.now());
    const keepAliveMs = this.service.config.queue.keepAliveMs;
    if (keepAliveMs > 0 && this.method !== 'HEAD') {
      this.keepAliveAt = this.startedAt + keepAliveMs;
      keepAliveWhileWaiting(this);
    }
    this.acquire(undefined);
  }

  /** The keep-alive clock's tick: false once the replica's answer (or the end) came. */
  keepAliveTick(now: number): boolean {
    if (this.phase === 'receiving' || this.phase === 'done') return false;
    if (now < this.keepAliveAt) return true;
    if (!this.downstream.keptAlive) {
      const asks = asksForStreamedAnswer(this.headers.accept, this.body, this.fields ?? (this.streamFlag ??= new StreamFlag()));
      if (asks !== true) return asks === undefined; // undecided: look again at the next tick
    }
    this.downstream.keepAlive(this.body.closesAfterAnswer, waitingComment(this.service.replicas.expectedReadyInMs()));
    this.keepAliveAt = now + this.service.config.queue.keepAliveMs;
    return true;
  }

  /** Asks for a replica (another than `exclude`, for the retry); marks the request queued if it waits. */
  protected acquire(exclude: Replica | undefined): void {
    this.service.replicas.acquire(this, exclude);
    // Neither a replica nor a failure came synchronously: the request waits in the queue.
    if (this.replica === undefined && this.phase !== 'done') {
      this.phase = 'queued';
      this.queuedAt = performance.now();
      this.body.hold();
      const trace = this.trace;
      if (trace !== undefined) {
        const replicas = this.service.replicas;
        trace.queued(replicas.queuedNow() - 1, replicas.readiness() !== 'ready', replicas.expectedReadyInMs());
      }
    }
  }

  onReplica(replica: Replica): void {
    if (this.phase === 'done') {
      // Over before the replica came (it was cancelled too late to matter): give it back.
      this.service.replicas.release(replica, 'unanswered');
      return;
    }
    if (this.phase === 'queued') this.queuedMs = performance.now() - this.queuedAt;
    this.phase = 'waiting';
    this.replica = replica;
    if (this.callerGone) {
      this.finish('client_closed', undefined, 'ok');
      return;
    }
    if (this.body.hasStarted) this.dispatch();
    else this.body.release();
  }

  // ── upstreamRequest + dispatch ─────────────────────────────────────────────────────────────

  /** The body's first bytes are here (or all of it; a body that is read: its first part, or all of it). */
  onBodyStart(): void {
    if (this.fields !== undefined && !this.readFields(this.fields)) return;
    if (this.replica !== undefined && this.phase === 'waiting') this.dispatch();
  }

  /** Its body's first part is in: routed by its model, admitted with its reservation, started. False if it ended. */
  private readFields(fields: BodyFields): boolean {
    if (this.router !== undefined && !this.routeByModel(this.router, fields)) return false;
    if (this.admitting === 'body' && !admitByBody(this, this.service.limitTable)) return false;
    if (this.awaitsState) {
      this.awaitsState = false;
      this.stateId = fields.stateId();
    }
    if (this.waitsForPrompt) {
      this.waitsForPrompt = false;
      this.prefix = fields.promptBlocks();
    }
    this.start();
    return this.phase !== 'done';
  }

  /** The body names its model (model-router.ts): from now on the request is its service's. False if it ended. */
  private routeByModel(router: ModelRouter, fields: BodyFields): boolean {
    this.router = undefined;
    const to = router.route(fields, this.body.complete, this.token);
    if (to instanceof RelayError) {
      this.fail(to);
      return false;
    }
    this.service = to;
    ({ maxWaitMs: this.maxWaitMs, affinity: this.affinity } = routedTerms(to, this.headers));
    // Its prompt was hashed in the router's blocks: they count when they are this service's.
    this.waitsForPrompt = fields.hashesPromptFor(to.prefix);
    if (!this.body.limitTo(to.config.maxRequestBytes)) {
      this.onBodyTooLarge();
      return false;
    }
    return true;
  }

  private dispatch(): void {
    this.phase = 'sending';
    this.inPool = true;
    if (this.trace !== undefined) this.trace.dispatched(performance.now());
    this.replica!.pool.request(this);
  }

  // ── upstreamResponse (UpstreamHandler) ─────────────────────────────────────────────────────

  onUpstreamConnection(connection: UpstreamExchange): void {
    this.inPool = false;
    this.connection = connection;
    this.answerContentType = undefined;
    // A chunked body held whole goes with its length (docs/api.md#what-the-replica-receives).
    const length = this.body.framedLength;
    const h = this.headers;
    const trace = this.trace;
    // Traced: the replica's parent is this attempt's span (tracing/request-trace.ts); else the caller's context as it came.
    const head = trace === undefined ? requestHead(this.method, this.target, this.replica!.host, h, length, this.requestId, h.traceparent, h.tracestate) : requestHead(this.method, this.target, this.replica!.host, h, length, this.requestId, trace.connected(this.replica!.host), trace.traceState);
    this.body.sendTo(connection, head, length < 0, this.method !== 'HEAD');
  }

  onUpstreamField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void {
    returnField(this, buf, nameStart, nameEnd, valueStart, valueEnd);
  }

  onUpstreamHead(status: number, contentLength: number): void {
    this.phase = 'receiving';
    if (this.trace !== undefined) this.trace.answered(status, performance.now());
    this.body.answered();
    stopKeepingAlive(this);
    const contentType = this.answerContentType;
    const bodyless = bodylessAnswer(this.method, status);
    if (this.downstream.keptAlive && !continuesStream(status, contentType, bodyless)) {
      this.asError = new AnswerAsError(status);
      return;
    }
    this.downstream.begin(status, contentType, contentLength, bodyless, this.body.closesAfterAnswer);
    // The one look at the answer's type: only a stream of events pays for finding them.
    const eventStream = !bodyless && isEventStream(contentType);
    if (eventStream) this.stream = new StreamTiming(this.service.streams, this.startedAt);
    this.usage = answerUsage(eventStream, contentType, contentLength, bodyless);
    if (this.learnsState) this.stateIds = status >= 200 && status < 300 && !bodyless ? new AnswerStateIds(eventStream, this.service.replicas, this.replica!) : undefined;
  }

  onUpstreamRead(parse: () => void): boolean {
    return this.downstream.duringRead(parse);
  }

  onUpstreamHeadRead(): void {
    if (this.asError === undefined) this.downstream.flushHead();
  }

  onUpstreamData(chunk: Buffer): boolean {
    if (this.asError !== undefined) {
      // Enough of it for the message: the rest is not wanted (`finish` aborts the exchange).
      if (this.asError.add(chunk)) this.endAsError();
      return true;
    }
    if (!this.downstream.closed) {
      if (this.stream !== undefined) this.stream.written(chunk);
      if (this.usage !== undefined) this.usage.scan(chunk);
      if (this.stateIds !== undefined) this.stateIds.scan(chunk);
      if (this.trace !== undefined) this.trace.answerChunk(chunk);
    }
    return this.downstream.write(chunk);
  }

  onUpstreamEnd(): void {
    this.connection = undefined;
    if (this.asError !== undefined) {
      this.endAsError();
      return;
    }
    this.downstream.end();
    this.finish('ok', undefined, 'ok');
  }

  /** The error event that replaces a replica's answer after keep-alive comments; the request is over. */
  private endAsError(): void {
    this.downstream.endWithErrorEvent(this.asError!.status, this.asError!.json());
    this.finish('ok', undefined, 'ok');
  }

  onUpstreamWritable(): void {
    this.body.onWritable();
  }

  /**
   * The answer's last byte is being written: the rest of an unfinished upload is not wanted. With
   * the replica's answer complete its slot is free now, before the caller can have the last byte:
   * a caller that sends its next request at once, on a new connection that another worker thread
   * takes, finds the replica free instead of queueing (and waking a cold start) behind a slot this
   * thread has not given back yet.
   */
  onResponseEnding(relayed: boolean): void {
    this.body.endUpload();
    const replica = this.replica;
    if (relayed && replica !== undefined && this.phase === 'receiving') {
      this.replica = undefined;
      this.service.replicas.release(replica, 'ok', this.keepAliveMs);
    }
  }

  /** The caller can take more bytes: let the replica's stream flow again. */
  onCallerWritable(): void {
    this.connection?.resume();
  }

  // ── finish (the other ways a request ends: request-state.ts) ──────────────────────────────────

  protected finished(): void {
    this.observer.onRelayFinished(this);
  }
}
