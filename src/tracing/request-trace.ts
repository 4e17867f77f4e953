// The span recorder of one traced request: its ids and the moments the relay passes through,
// written by the relay as they happen (a field store each, no clock reading but the ones it
// makes anyway and the few below), read once when the request is over. Only a request that is
// sampled has one (tracer.ts); the relay's every hook is `if (this.trace !== undefined)`.
//
// What it keeps and who writes it:
//   admission    — `admittedAt`: relay.ts `start`, once its gate opens (a router's route and a
//                  limited token's admission decided)
//   queue        — `queued`: relay.ts `acquire`, when the request waits (its priority, the queue's
//                  length and the cold start expected at that moment)
//   attempts     — `dispatched` / `connected` / `answered` / `attemptFailed`: relay.ts and
//                  request-state.ts, one CLIENT span per try (two at most: the one retry)
//   the answer   — `answerChunk`: the answer's `"model"`, looked for in its first bytes only
//   the end      — `end`: the relay's record (status, outcome, usage, stream timing), copied
// span-records.ts turns it into spans when the batch is exported, off the request path.
import { formatTraceparent, newSpanId } from './trace-context.js';
import { findModel } from './gen-ai.js';

/** The fields of a request's JSON body that name its model and its budget (relay/body/body-fields.ts reads them). */
export interface RequestedFields {
  readonly requestedModel: string | undefined;
  requestedMaxTokens(): number | undefined;
}

/** One try of the request on a replica: a CLIENT span. */
export interface Attempt {
  readonly spanId: string;
  readonly startedAt: number;
  /** `host:port` of the replica (set when a connection is ready). */
  host: string;
  connectedAt: number;
  /** The replica's status line: when, and its status (0: none came). */
  headAt: number;
  status: number;
  /** Why this try failed and the request was sent again (undefined: it did not). */
  failed: string | undefined;
  endedAt: number;
}

/** What the relay knows of a request when it is over (relay.ts's RelayRequest is one). */
export interface EndedRequest {
  readonly method: string;
  readonly path: string;
  readonly slug: string;
  readonly routedBy: string | undefined;
  readonly requestId: string;
  readonly token: { readonly name: string };
  readonly priority: number;
  readonly queuedAt: number;
  readonly queuedMs: number;
  readonly limit: object | undefined;
  readonly error: { readonly code: string; readonly limit?: string | undefined } | undefined;
  readonly stream: { readonly events: number; readonly firstEventAt: number; readonly lastEventAt: number } | undefined;
  readonly downstream: { readonly firstByteAt: number; readonly answered: boolean };
  readonly fields: RequestedFields | undefined;
  /** False for a request refused before it named a service or router: it has no route (default true). */
  readonly routed?: boolean;
}

/** The record of how it ended (relay/finished-request.ts's FinishedRequest is one). */
export interface EndedRecord {
  readonly status: number;
  readonly outcome: string;
  readonly ms: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly usageReported: boolean;
}

/** Where finished traces go (tracer.ts). */
export interface TraceSink {
  finished(trace: RequestTrace): void;
}

/** What the spans say of a request, copied when it is over. */
export interface EndedSummary {
  method: string;
  /** `{path}` after the service's prefix, as received. */
  path: string;
  slug: string;
  routedBy: string | undefined;
  /** It named a service or router (`http.route`); else `path` is the whole path as received. */
  routed: boolean;
  requestId: string;
  tokenName: string;
  priority: number;
  queuedAt: number;
  queuedMs: number;
  limited: boolean;
  errorCode: string | undefined;
  errorLimit: string | undefined;
  /** Events of a streamed answer (-1: not a stream) and when the first and last were written. */
  events: number;
  firstEventAt: number;
  lastEventAt: number;
  firstByteAt: number;
  answered: boolean;
  requestModel: string | undefined;
  maxTokens: number | undefined;
  status: number;
  outcome: string;
  /** The answer's usage (-1: it reported none). */
  promptTokens: number;
  completionTokens: number;
}

/** The most of an answer looked at for its `"model"`: an OpenAI answer or chunk names it in its first 200 bytes. */
const MODEL_SCAN_BYTES = 4096;

export class RequestTrace {
  readonly spanId = newSpanId();
  /** When its gate opened (relay.ts `start`); 0 before. */
  admittedAt = 0;
  /** Waiting in the queue: requests already waiting when it came (-1: never queued). */
  queuedAhead = -1;
  /** The cold start it waited on: expected ms at entry (-1: none measured), and whether there was one. */
  coldExpectedMs = -1;
  coldStart = false;
  readonly attempts: Attempt[] = [];
  /** The body's fields read for tracing alone (a request whose body Sluice does not read otherwise). */
  fields: RequestedFields | undefined = undefined;
  /** The answer's `"model"`, once found; the bytes looked at so far. */
  responseModel: string | undefined = undefined;
  private scanned = 0;
  /** Copied from the relay when the request is over (`end`): nothing of the request is kept alive. */
  ended: EndedSummary | undefined = undefined;
  endedAt = 0;
  /** Its span tree as exported (span-records.ts), for the bound of the export queue. */
  spans = 0;

  constructor(
    /** Where it goes when it ends (the tracer of its thread when it began, even if a reload replaced it since). */
    private readonly sink: TraceSink,
    readonly traceId: string,
    /** The caller's span, when its `traceparent` was continued. */
    readonly parentSpanId: string | undefined,
    /** The caller's `tracestate` (forwarded as it came), when its trace was continued. */
    readonly traceState: string | undefined,
    readonly startedAt: number,
    /** `gen_ai.operation.name` by the request's path, or undefined for traffic that is not OpenAI-style. */
    readonly operation: string | undefined,
  ) {}

  /** Its gate opened: routed and admitted (relay.ts `start`). */
  admitted(now: number): void {
    if (this.admittedAt === 0) this.admittedAt = now;
  }

  /** It waits in the queue (relay.ts `acquire`): `ahead` requests before it, `coldExpectedMs` of a cold start (-1: none measured). */
  queued(ahead: number, cold: boolean, coldExpectedMs: number): void {
    this.queuedAhead = ahead;
    this.coldStart = cold;
    this.coldExpectedMs = coldExpectedMs;
  }

  /** A try begins: the replica's pool is asked for a connection. */
  dispatched(now: number): void {
    this.attempts.push({ spanId: newSpanId(), startedAt: now, host: '', connectedAt: 0, headAt: 0, status: 0, failed: undefined, endedAt: 0 });
  }

  /** The connection is ready: the replica's `traceparent`, naming this try's span. */
  connected(host: string): string {
    const attempt = this.attempts[this.attempts.length - 1]!;
    attempt.host = host;
    attempt.connectedAt = performance.now();
    return formatTraceparent(this.traceId, attempt.spanId);
  }

  /** The replica's status line came. */
  answered(status: number, now: number): void {
    const attempt = this.attempts[this.attempts.length - 1];
    if (attempt === undefined) return;
    attempt.headAt = now;
    attempt.status = status;
  }

  /** This try failed before an answer and the request is sent again (`code`: why). */
  attemptFailed(code: string): void {
    const attempt = this.attempts[this.attempts.length - 1];
    if (attempt === undefined || attempt.endedAt !== 0) return;
    attempt.failed = code;
    attempt.endedAt = performance.now();
  }

  /** A chunk of the answer, relayed: its first bytes are looked at for the `"model"` it names. */
  answerChunk(chunk: Buffer): void {
    // Only an OpenAI-style request's answer names a model.
    if (this.operation === undefined || this.scanned >= MODEL_SCAN_BYTES) return;
    const model = findModel(chunk, MODEL_SCAN_BYTES - this.scanned);
    this.scanned += chunk.length;
    if (model !== undefined) {
      this.responseModel = model;
      this.scanned = MODEL_SCAN_BYTES;
    }
  }

  /** The request is over (data plane `onRelayFinished`): what the spans say of it, handed to its sink. */
  finish(r: EndedRequest, f: EndedRecord): void {
    const fields = r.fields ?? this.fields;
    const stream = r.stream;
    this.ended = {
      method: r.method,
      path: r.path,
      slug: r.slug,
      routedBy: r.routedBy,
      routed: r.routed ?? true,
      requestId: r.requestId,
      tokenName: r.token.name,
      priority: r.priority,
      queuedAt: r.queuedAt,
      queuedMs: r.queuedMs,
      limited: r.limit !== undefined,
      errorCode: r.error?.code,
      errorLimit: r.error?.limit,
      events: stream === undefined ? -1 : stream.events,
      firstEventAt: stream === undefined ? 0 : stream.firstEventAt,
      lastEventAt: stream === undefined ? 0 : stream.lastEventAt,
      firstByteAt: r.downstream.firstByteAt,
      answered: r.downstream.answered,
      requestModel: fields?.requestedModel,
      maxTokens: fields?.requestedMaxTokens(),
      status: f.status,
      outcome: f.outcome,
      promptTokens: f.usageReported ? f.promptTokens : -1,
      completionTokens: f.usageReported ? f.completionTokens : -1,
    };
    this.endedAt = this.startedAt + f.ms;
    // What it read is copied: the walk's buffers go now, not when the batch does.
    this.fields = undefined;
    const last = this.attempts[this.attempts.length - 1];
    if (last !== undefined && last.endedAt === 0) last.endedAt = this.endedAt;
    this.sink.finished(this);
  }
}
