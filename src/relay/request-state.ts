// How one relayed request ends (relay.ts's RelayRequest is one of these): the state every phase
// shares, and the cold paths — a failed exchange (truncated, retried once on another replica, or
// answered with the error), a body too large, a caller gone or a gateway closing, and `finish`:
// the queue left or the exchange ended, the replica released with its part in the end (the
// settlement its replica set books), the stream and usage closed, the record handed to the
// observer (finished-request.ts). relay.ts keeps the request's path in order (acquire, dispatch,
// the replica's answer); nothing here runs per chunk.
import type { HttpResponse } from 'uWebSockets.js';
import { type Outcome, RelayError } from '../http/errors.js';
import type { Interruption } from '../metrics/request-counters.js';
import type { Replica, ReplicaWaiter } from './replica-set.js';
import type { ReleaseOutcome } from '../replicas/outcomes.js';
import type { UpstreamExchange, UpstreamHandler } from '../upstream/handler.js';
import { faultBeforeHead } from '../upstream/errors.js';
import type { AnswerUsage } from './answer/answer-usage.js';
import { CallerBody, type CallerBodyListener } from './body/caller-body.js';
import { Downstream, type DownstreamListener } from './answer/downstream.js';
import type { ServiceRuntime } from './service-runtime.js';
import { type KeptAlive, stopKeepingAlive } from './answer/waiting-comments.js';
import { interruptionOf, type StreamTiming } from './answer/stream-timing.js';
import type { RequestTrace } from '../tracing/request-trace.js';

/** What the end of a request needs to know of the gateway. */
export interface RelayOwner {
  /** The gateway is closing its connections: a response cut now was cut by it, not by its caller. */
  readonly closing: boolean;
}

/**
 * The lifecycle of one request:
 * - `waiting`: no replica yet (or a replica, but the body has not started arriving);
 * - `queued`: in the replica set's queue; the caller's socket is paused;
 * - `sending`: dispatched (waiting for a connection, or written); no status line from the replica yet;
 * - `receiving`: the replica's status line arrived; its body is being relayed;
 * - `done`: finished; nothing more happens.
 */
type Phase = 'waiting' | 'queued' | 'sending' | 'receiving' | 'done';

export abstract class RequestState implements ReplicaWaiter, UpstreamHandler, CallerBodyListener, DownstreamListener, KeptAlive {
  readonly downstream: Downstream;
  readonly body: CallerBody;
  phase: Phase = 'waiting';
  replica: Replica | undefined = undefined;
  /** `performance.now()` when the request entered the queue, 0 if it never waited. */
  queuedAt = 0;
  /** Milliseconds spent in the queue. */
  queuedMs = 0;
  outcome: Outcome = 'ok';
  /** The error behind a non-ok outcome, with the upstream's original error as `cause`. */
  error: RelayError | undefined = undefined;
  /** The request was sent again after the first replica could not be reached. */
  retried = false;
  /** The events of an answer with Content-Type text/event-stream, as they are relayed. */
  stream: StreamTiming | undefined = undefined;
  /** The LLM token usage of an event stream or a JSON answer, as it is relayed. */
  usage: AnswerUsage | undefined = undefined;
  /** Its span recorder, when tracing is on and it is sampled (tracing/request-trace.ts); else undefined. */
  trace: RequestTrace | undefined = undefined;
  /** The keep-alive clock's list (waiting-comments.ts). */
  keepAlivePrev: KeptAlive | undefined = undefined;
  keepAliveNext: KeptAlive | undefined = undefined;
  keepAliveWatched = false;
  /** Why that answer was cut after its status line, if it was. */
  private interruption: Interruption | undefined = undefined;
  /** The connection carrying the exchange, once it is ready. */
  protected connection: UpstreamExchange | undefined = undefined;
  /** Dispatched, and the pool has not answered with a connection or an error yet. */
  protected inPool = false;
  protected callerGone = false;
  /** Why the first replica could not be reached, kept for the answer if the retry finds none. */
  private unreachable: RelayError | undefined = undefined;

  /** uWS callback: bound once per request. */
  readonly abortHandler = (): void => this.onCallerAborted();

  constructor(
    /** Its service; a router's request has its router here until it is routed (relay.ts `routeByModel`). */
    protected service: ServiceRuntime,
    protected readonly observer: RelayOwner,
    res: HttpResponse,
    readonly method: string,
    /** From the framing: bytes, or -1 for a chunked body. */
    bodyLength: number,
    readonly requestId: string,
  ) {
    this.downstream = new Downstream(res, requestId, this);
    this.body = new CallerBody(res, service.config.maxRequestBytes, bodyLength, this, service.held);
  }

  // The request's path, in relay.ts (the interfaces above say what each one is told).
  abstract readonly priority: number;
  abstract readonly maxWaitMs: number;
  /** `X-Sluice-Keep-Alive` in ms (0: not asked), handed to the replica set with the replica. */
  abstract readonly keepAliveMs: number;
  abstract readonly affinity: number;
  abstract readonly stateId: string | undefined;
  abstract onReplica(replica: Replica): void;
  abstract onBodyStart(): void;
  abstract onUpstreamConnection(connection: UpstreamExchange): void;
  abstract onUpstreamField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void;
  abstract onUpstreamHead(status: number, contentLength: number): void;
  abstract onUpstreamRead(parse: () => void): boolean;
  abstract onUpstreamHeadRead(): void;
  abstract onUpstreamData(chunk: Buffer): boolean;
  abstract onUpstreamEnd(): void;
  abstract onUpstreamWritable(): void;
  abstract onCallerWritable(): void;
  abstract onResponseEnding(relayed: boolean): void;
  abstract keepAliveTick(now: number): boolean;
  /** Asks for a replica (another than `exclude`, for the retry); marks the request queued if it waits. */
  protected abstract acquire(exclude: Replica | undefined): void;
  /** The request is over: its record goes to the observer. */
  protected abstract finished(): void;

  onNoReplica(error: RelayError): void {
    if (this.phase === 'queued') {
      // The set has already taken it out of its queue.
      this.queuedMs = performance.now() - this.queuedAt;
      this.phase = 'waiting';
    }
    this.fail(this.unreachable !== undefined && error.code === 'upstream_unavailable' ? this.unreachable : error);
  }

  onUpstreamError(error: RelayError): void {
    this.inPool = false;
    this.connection = undefined;
    if (this.phase === 'done') return;
    this.upstreamFailed(error);
  }

  onBodyTooLarge(): void {
    const error = new RelayError('payload_too_large', {
      message: `The request body is larger than ${this.service.config.maxRequestBytes} bytes.`,
    });
    if (this.phase === 'sending' || this.phase === 'receiving') {
      this.abortUpstream();
      this.upstreamFailed(error);
    } else {
      this.fail(error);
    }
  }

  onBodyRefused(reason: string): void {
    const error = new RelayError('bad_request', { message: reason });
    if (this.phase === 'sending' || this.phase === 'receiving') {
      // Cut before the replica has the body it would read (body-fields.ts).
      this.abortUpstream();
      this.upstreamFailed(error);
    } else {
      this.fail(error);
    }
  }

  /** The exchange failed: truncate a relayed answer, retry a request the replica never got, or answer with the error. */
  protected upstreamFailed(error: RelayError): void {
    if (this.callerGone) {
      this.finish('client_closed', undefined, 'ok');
      return;
    }
    if (this.phase === 'receiving' && this.downstream.relaying) {
      // The status line was relayed: the caller must be able to tell the answer is incomplete.
      if (this.stream !== undefined) this.interruption = interruptionOf(error);
      this.body.stop();
      this.downstream.truncate();
      const callers = callersFault(error);
      this.finish(callers ? error.code : 'upstream_error', callers ? error : new RelayError('upstream_error', { cause: error.cause ?? error }), callers ? 'ok' : 'failed');
      return;
    }
    // Nothing of the answer reached the caller yet (at most the replica's status, not written).
    if (error.retryable && !this.retried && this.body.resendable && this.replica !== undefined) {
      // Nothing reached the replica: once, another ready replica.
      const unreachable = this.replica;
      this.replica = undefined;
      this.retried = true;
      if (this.trace !== undefined) this.trace.attemptFailed(error.code);
      this.unreachable = error;
      this.phase = 'waiting';
      this.service.replicas.release(unreachable, 'unreachable');
      this.acquire(unreachable);
      return;
    }
    // A refused retry takes that replica out of rotation too; a reset or a missed status-line
    // deadline counts toward ejecting it.
    this.fail(error, error.retryable ? 'unreachable' : callersFault(error) ? 'ok' : faultBeforeHead(error));
  }

  /** Ends the exchange with the replica, wherever it is: no upstream callback comes after this. */
  protected abortUpstream(): void {
    const connection = this.connection;
    if (connection !== undefined) {
      this.connection = undefined;
      connection.abort();
    } else if (this.inPool) {
      this.inPool = false;
      this.replica!.pool.cancel(this);
    }
  }

  private onCallerAborted(): void {
    this.callerGone = true;
    this.downstream.aborted();
    this.body.stop();
    if (this.phase === 'done') return;
    // Without a connection or a pending one, an exchange under way is already over and whoever
    // ended it (a truncation closes the caller's connection from inside `upstreamFailed`) finishes.
    if ((this.phase === 'sending' || this.phase === 'receiving') && this.connection === undefined && !this.inPool) return;
    if (this.observer.closing) {
      // The gateway closed the connection (its drain ran out of time, or it was closed): the caller did not leave.
      if (this.stream !== undefined) this.interruption = 'draining';
      this.finish('draining', new RelayError('draining'), 'ok');
      return;
    }
    this.finish('client_closed', undefined, 'ok');
  }

  /** Refused before it started (the shared limit store's answer after a wait: request-limits.ts). */
  refuse(error: RelayError): void {
    this.fail(error);
  }

  /** Answers with one of Sluice's errors (or truncates, if the relayed status was sent). */
  protected fail(error: RelayError, release: ReleaseOutcome = 'ok'): void {
    if (this.phase === 'done') return;
    // A caller still sending its body gets the error at once; what becomes of the rest of the body
    // and of the connection is CallerBody.endUpload's choice.
    const closeLater = !this.callerGone && this.body.endUpload();
    this.body.stop();
    this.downstream.error(error, this.method === 'HEAD', closeLater);
    this.finish(error.code, error, release);
  }

  /**
   * `release`: the replica's part in the end, `ok` when none of its fault; with the replica's
   * status line seen that is `ok` (it answered), without it `unanswered`.
   */
  protected finish(outcome: Outcome, error: RelayError | undefined, release: ReleaseOutcome): void {
    if (this.phase === 'done') return;
    const answered = this.phase === 'receiving';
    // A queued request that ends (caller gone, body too large) leaves the queue: it never reaches a replica.
    if (this.phase === 'queued') {
      this.queuedMs = performance.now() - this.queuedAt;
      this.service.replicas.cancel(this);
    } else {
      this.abortUpstream();
    }
    this.phase = 'done';
    stopKeepingAlive(this);
    this.outcome = outcome;
    this.error = error;
    this.stream?.closed(this.interruption);
    this.usage?.end();
    const replica = this.replica;
    if (replica !== undefined) {
      this.replica = undefined;
      this.service.replicas.release(replica, answered ? (release === 'ok' ? 'ok' : 'failed') : release === 'ok' ? 'unanswered' : release, this.keepAliveMs);
    }
    this.finished();
  }
}

/** An exchange cut for the caller's body (too large, or contradicting what was read of it): no fault of the replica's. */
function callersFault(error: RelayError): boolean {
  return error.code === 'payload_too_large' || error.code === 'bad_request';
}
