// One realtime session (docs/api.md#realtime-sessions): a caller's WebSocket relayed to a replica's,
// from the moment its handshake passed the session filter (session-filter.ts) to its record
// (session-record.ts).
//
// Phases, in order:
//   waiting / queued — ask the service's replica set for a replica, as a request does (the queue,
//                      its priority, a cold start); the caller's handshake is not answered yet, so
//                      a refusal is an HTTP answer (`503`, …)
//   connecting       — the replica's own WebSocket handshake (the `ws` client), with the caller's
//                      other subprotocols; `timeouts.responseHeadersMs` bounds it
//   open             — the caller's handshake answered `101` with the subprotocol the replica
//                      picked; then every message relayed both ways as it comes, text and binary
//                      kept apart, until either side closes or a limit ends it
//   done             — the replica released, the record to the data plane
//
// Backpressure, per message: a caller that reads slower than the replica writes fills uWS's buffer
// of the caller's socket; from the first message uWS buffers, the replica's socket is not read
// (`pause`) until uWS's `drain` finds the buffer below LOW_WATER. The other way, uWS cannot stop
// reading a caller: what the replica has not taken yet (the `ws` client's `bufferedAmount`) may grow
// to twice the service's largest message, and past it the session is closed with `1008`.
// The session holds its replica (one request in flight) for its whole life.
import type { HttpResponse, us_socket_context_t, WebSocket as CallerSocket } from 'uWebSockets.js';
import { WebSocket as ReplicaSocket } from 'ws';
import { drainingError, RelayError, type Outcome } from '../../http/errors.js';
import type { ReleaseOutcome } from '../../replicas/outcomes.js';
import type { TokenLimit } from '../../limits/limit-table.js';
import type { Replica, ReplicaWaiter } from '../replica-set.js';
import type { TokenEntry } from '../request/auth.js';
import type { RoutedService } from '../model-router.js';
import { writeError } from '../answer/error-answer.js';
import { SessionUsage } from './session-usage.js';
import { closeCodeFromReplica, forwardableClose, SESSION_CLOSE, type SessionClose } from './close-codes.js';

/** Below this many bytes buffered for the caller, a replica paused for it is read again. */
const LOW_WATER = 64 * 1024;

/** What a session tells the data plane that owns it. */
export interface SessionObserver {
  /** The gateway is closing its connections: a session cut now was cut by it. */
  readonly closing: boolean;
  /** The gateway drains: a session that opens now is closed at once (`1001`). */
  readonly draining: boolean;
  /** The caller's handshake was answered: the session is open until `onSessionFinished`. */
  onSessionOpen(session: RelaySession): void;
  onSessionFinished(session: RelaySession): void;
}

/** The user data of a caller's uWS WebSocket. */
export interface SessionHolder {
  readonly session: RelaySession;
}

type SessionPhase = 'waiting' | 'queued' | 'connecting' | 'open' | 'done';

/** What the caller's side of a session needs to answer its handshake. */
export interface CallerHandshake {
  readonly res: HttpResponse;
  readonly context: us_socket_context_t;
  readonly key: string;
  readonly protocols: string[];
}

export class RelaySession implements ReplicaWaiter {
  readonly startedAt = performance.now();
  phase: SessionPhase = 'waiting';
  replica: Replica | undefined = undefined;
  queuedAt = 0;
  queuedMs = 0;
  /** When the caller's handshake was answered (`performance.now()`), 0 before. */
  openedAt = 0;
  /** The last message either way (or the opening), for the idle time-out. */
  lastMessageAt = 0;
  /** Messages and their bytes: from the caller to the replica (in), and back (out). */
  messagesIn = 0;
  messagesOut = 0;
  bytesIn = 0;
  bytesOut = 0;
  /** The close code and reason the caller got (or 0, with no WebSocket). */
  closeCode = 0;
  closeReason = '';
  outcome: Outcome = 'ok';
  error: RelayError | undefined = undefined;
  /** The LLM token usage the replica's events report (session-usage.ts). */
  readonly usage = new SessionUsage();
  /** Its token's limits once admitted (ended once, by the data plane), else undefined. */
  limit: TokenLimit | undefined = undefined;
  reserved = 0;
  admitting: 'no' | 'store' | 'body' = 'no';
  readonly fields = undefined;
  private ratelimitHead: [string, string] | undefined = undefined;
  private caller: CallerHandshake | undefined;
  private socket: CallerSocket<SessionHolder> | undefined = undefined;
  private upstream: ReplicaSocket | undefined = undefined;
  /** The replica's socket is not read until the caller's buffer drains. */
  private paused = false;
  /** The gateway is ending the session (`end`): the caller's close that follows is its own. */
  private ending = false;
  private callerGone = false;
  /** What failed on the replica's open socket (its `close` follows). */
  private upstreamError: Error | undefined = undefined;

  /** A session names no stored state (the ReplicaWaiter's stored-state pick: replica-set.ts). */
  readonly stateId = undefined;

  /** uWS callback: bound once per session. */
  readonly abortHandler = (): void => this.onCallerAborted();

  constructor(
    public service: RoutedService & { readonly config: RoutedService['config'] },
    private readonly observer: SessionObserver,
    caller: CallerHandshake,
    /** `{path}?{query}` as received: the replica's request target. */
    private readonly target: string,
    readonly path: string,
    /** The headers the replica gets besides the handshake's: `X-Request-Id`, trace context, `forwardHeaders`. */
    private readonly headers: Record<string, string>,
    readonly requestId: string,
    public token: TokenEntry,
    readonly priority: number,
    readonly maxWaitMs: number,
    readonly affinity: number,
    /** Sent to a router: its slug. */
    readonly routedBy: string | undefined,
  ) {
    this.caller = caller;
  }

  get slug(): string {
    return this.service.config.slug;
  }

  /** The status its handshake got: 101 once open, Sluice's error's, or 499 when the caller left first. */
  get status(): number {
    if (this.openedAt > 0) return 101;
    return this.outcome === 'client_closed' ? 499 : (this.error?.status ?? 500);
  }

  /** For the limits' admission (request-limits.ts): the RateLimit headers go with the `101`. */
  get downstream(): { ratelimit(policy: string, value: string): void } {
    return this;
  }

  ratelimit(policy: string, value: string): void {
    this.ratelimitHead = [policy, value];
  }

  // ── waiting for a replica ─────────────────────────────────────────────────────────────────────

  /** Once admitted (by its limits too): asks for a replica. */
  start(): void {
    if (this.admitting !== 'no' || this.phase !== 'waiting') return;
    this.service.replicas.acquire(this);
    if (this.replica === undefined && this.phase === 'waiting') {
      this.phase = 'queued';
      this.queuedAt = performance.now();
    }
  }

  onReplica(replica: Replica): void {
    if (this.phase === 'done') {
      this.service.replicas.release(replica, 'unanswered');
      return;
    }
    if (this.phase === 'queued') this.queuedMs = performance.now() - this.queuedAt;
    this.replica = replica;
    this.connect(replica);
  }

  onNoReplica(error: RelayError): void {
    if (this.phase === 'queued') this.queuedMs = performance.now() - this.queuedAt;
    this.refuse(error);
  }

  /** Refused before its handshake was answered: Sluice's error as an HTTP answer. */
  refuse(error: RelayError, release: ReleaseOutcome = 'unanswered'): void {
    if (this.phase === 'done') return;
    const caller = this.caller;
    if (caller !== undefined && !this.callerGone) writeError(caller.res, error, this.requestId, 'close', false);
    this.caller = undefined;
    this.finish(error.code, error, release);
  }

  // ── connecting ────────────────────────────────────────────────────────────────────────────────

  private connect(replica: Replica): void {
    this.phase = 'connecting';
    const config = this.service.config;
    const url = `${replica.origin.startsWith('https:') ? 'wss' : 'ws'}:${replica.origin.slice(replica.origin.indexOf('//'))}${this.target}`;
    const upstream = new ReplicaSocket(url, this.caller!.protocols, {
      headers: this.headers,
      perMessageDeflate: false,
      maxPayload: config.sessions.maxMessageBytes,
      handshakeTimeout: config.timeouts.responseHeadersMs,
      followRedirects: false,
    });
    this.upstream = upstream;
    upstream.on('open', this.onUpstreamOpen);
    upstream.on('message', this.onUpstreamMessage);
    upstream.on('close', this.onUpstreamClose);
    upstream.on('error', this.onUpstreamError);
  }

  private readonly onUpstreamOpen = (): void => {
    const caller = this.caller!;
    this.caller = undefined;
    const upstream = this.upstream!;
    caller.res.cork(() => {
      // Headers of a 101 need the status first (uWS writes `200 OK` otherwise).
      caller.res.writeStatus('101 Switching Protocols');
      caller.res.writeHeader('x-request-id', this.requestId);
      if (this.ratelimitHead !== undefined) {
        caller.res.writeHeader('ratelimit-policy', this.ratelimitHead[0]);
        caller.res.writeHeader('ratelimit', this.ratelimitHead[1]);
      }
      // uWS calls `open` (onCallerOpen) before it returns.
      caller.res.upgrade<SessionHolder>({ session: this }, caller.key, upstream.protocol, '', caller.context);
    });
  };

  /** The replica could not be reached, refused the handshake or did not answer it in time. */
  private readonly onUpstreamError = (err: Error): void => {
    if (this.phase !== 'connecting') {
      // Once open, its `close` follows and says how it ended.
      this.upstreamError = err;
      return;
    }
    this.upstream = undefined;
    const message = err.message;
    if (message.startsWith('Unexpected server response')) this.refuse(new RelayError('upstream_error', { message: `The replica refused the WebSocket handshake (${message.slice(11).toLowerCase()}).`, cause: err }));
    else if (message.includes('handshake has timed out')) this.refuse(new RelayError('upstream_timeout', { cause: err }), 'timeout');
    else this.refuse(new RelayError('upstream_unavailable', { cause: err }), 'unreachable');
  };

  // ── open: the caller's side (uWS) ─────────────────────────────────────────────────────────────

  onCallerOpen(socket: CallerSocket<SessionHolder>): void {
    this.socket = socket;
    this.phase = 'open';
    this.openedAt = this.lastMessageAt = performance.now();
    this.observer.onSessionOpen(this);
    // Its replica came while the drain began: it ends as the open ones did.
    if (this.observer.draining) this.drain();
  }

  /** A message of the caller (its ArrayBuffer valid during the call only: copied). */
  onCallerMessage(message: ArrayBuffer, binary: boolean): void {
    if (this.phase !== 'open') return;
    const size = message.byteLength;
    const limit = this.service.config.sessions.maxMessageBytes;
    if (size > limit) {
      this.end(SESSION_CLOSE.tooBig, `message larger than ${limit} bytes`, 'payload_too_large');
      return;
    }
    this.messagesIn += 1;
    this.bytesIn += size;
    this.lastMessageAt = performance.now();
    const upstream = this.upstream!;
    upstream.send(Buffer.copyBytesFrom(new Uint8Array(message)), { binary });
    if (upstream.bufferedAmount > 2 * limit) this.end(SESSION_CLOSE.policy, 'the replica is not reading', 'ok');
  }

  /** uWS wrote out some of what it buffered for the caller. */
  onCallerDrain(): void {
    if (this.paused && this.socket !== undefined && this.socket.getBufferedAmount() < LOW_WATER) {
      this.paused = false;
      this.upstream?.resume();
    }
  }

  /** The caller's socket closed: its close frame (forwarded to the replica), its leaving, or the gateway's own `end`. */
  onCallerClose(code: number, reason: ArrayBuffer): void {
    this.socket = undefined;
    if (this.ending || this.phase === 'done') return;
    this.closeCode = code;
    this.closeReason = Buffer.from(reason).toString();
    const upstream = this.upstream;
    this.upstream = undefined;
    if (upstream !== undefined) {
      const forward = forwardableClose(code);
      if (forward === undefined) upstream.terminate();
      else upstream.close(forward, this.closeReason);
    }
    const closedByGateway = this.observer.closing;
    this.finish(closedByGateway ? 'draining' : code === 1006 ? 'client_closed' : 'ok', closedByGateway ? drainingError() : undefined, 'ok');
  }

  // ── open: the replica's side (ws) ─────────────────────────────────────────────────────────────

  private readonly onUpstreamMessage = (data: Buffer, binary: boolean): void => {
    const socket = this.socket;
    if (socket === undefined) return;
    this.messagesOut += 1;
    this.bytesOut += data.length;
    this.lastMessageAt = performance.now();
    if (!binary) this.usage.scan(data);
    const sent = socket.send(data, binary);
    if (sent === 2) {
      // Over uWS's maxBackpressure (which a paused replica should never reach): never dropped silently.
      this.end(SESSION_CLOSE.policy, 'the caller is not reading', 'ok');
      return;
    }
    if (sent === 0 && !this.paused) {
      this.paused = true;
      this.upstream?.pause();
    }
  };

  private readonly onUpstreamClose = (code: number, reason: Buffer): void => {
    if (this.phase !== 'open' || this.upstream === undefined) return;
    this.upstream = undefined;
    const tooBig = (this.upstreamError as { code?: string } | undefined)?.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH';
    const close = tooBig ? { code: SESSION_CLOSE.tooBig, reason: 'the replica sent a message over the limit', failed: true } : closeCodeFromReplica(code, reason.toString());
    this.end(close.code, close.reason, close.failed ? 'upstream_error' : 'ok', close.failed ? 'failed' : 'ok', close);
  };

  // ── ending ────────────────────────────────────────────────────────────────────────────────────

  /** The registry's tick (open-sessions.ts): the idle and total time-outs. */
  tick(now: number): void {
    if (this.phase !== 'open') return;
    const config = this.service.config;
    if (now - this.lastMessageAt >= config.timeouts.bodyIdleMs) this.end(SESSION_CLOSE.policy, `idle for ${config.timeouts.bodyIdleMs} ms`, 'ok');
    else if (now - this.openedAt >= config.sessions.maxMs) this.end(SESSION_CLOSE.policy, `longer than ${config.sessions.maxMs} ms`, 'ok');
  }

  /** The gateway drains: closed with `1001`. */
  drain(): void {
    this.end(SESSION_CLOSE.goingAway, 'the gateway is draining', 'draining', 'ok');
  }

  /**
   * Sluice ends an open session: the caller gets `code` and `reason`, the replica a close of its
   * own (a failed replica's socket is already gone).
   */
  private end(code: number, reason: string, outcome: Outcome, release: ReleaseOutcome = 'ok', from?: SessionClose): void {
    if (this.phase === 'done') return;
    this.closeCode = code;
    this.closeReason = reason;
    const upstream = this.upstream;
    this.upstream = undefined;
    if (upstream !== undefined && from === undefined) upstream.close(code === SESSION_CLOSE.tooBig || code === SESSION_CLOSE.goingAway ? code : SESSION_CLOSE.goingAway, reason);
    const socket = this.socket;
    this.socket = undefined;
    this.ending = true;
    if (socket !== undefined) socket.end(code, reason);
    const error = outcome === 'ok' ? undefined : outcome === 'draining' ? drainingError() : new RelayError(outcome, { message: reason });
    this.finish(outcome, error, release);
  }

  private onCallerAborted(): void {
    this.callerGone = true;
    this.caller = undefined;
    if (this.phase === 'done') return;
    const upstream = this.upstream;
    this.upstream = undefined;
    upstream?.terminate();
    this.finish(this.observer.closing ? 'draining' : 'client_closed', undefined, 'ok');
  }

  private finish(outcome: Outcome, error: RelayError | undefined, release: ReleaseOutcome): void {
    if (this.phase === 'done') return;
    if (this.phase === 'queued') {
      this.queuedMs = performance.now() - this.queuedAt;
      this.service.replicas.cancel(this);
    }
    const answered = this.openedAt > 0;
    this.phase = 'done';
    this.outcome = outcome;
    this.error = error;
    const replica = this.replica;
    if (replica !== undefined) {
      this.replica = undefined;
      this.service.replicas.release(replica, answered ? (release === 'ok' ? 'ok' : 'failed') : release === 'ok' ? 'unanswered' : release);
    }
    this.observer.onSessionFinished(this);
  }
}
