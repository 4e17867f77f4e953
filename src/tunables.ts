// Sluice's internal tunables that more than one module, or a test, reads: sizes, limits and
// timings that shape its behaviour but are not part of the configuration. Each says what it bounds
// and why it has its value; the module that uses it says how. A tunable that one module alone
// reads is declared in that module, the same way. Per-service replica timings that tests shorten
// field by field are `DEFAULT_TUNING` (control/service/tuning.ts) and `DEFAULT_KUBERNETES_TUNING`
// (control/kinds/kubernetes/kubernetes-source.ts).

// ── The caller's request and answer ────────────────────────────────────────────────────────────────

// used by relay/body/caller-body.ts, relay/body/held-bodies.ts (and a test)
/**
 * How many bytes of a request waiting in the service's queue may be held before its caller's
 * socket is paused (caller-body.ts's QUEUE_HIGH_WATER once it has a replica): lower, since a
 * thousand requests may wait. The socket is not paused below it, so a caller that leaves while
 * queued is noticed at once (a paused socket is not read, and its close would only be seen on
 * resume).
 */
export const HOLD_HIGH_WATER = 64 * 1024;

// used by relay/body/stream-request.ts (and a test)
/** The most of a body walked for its `stream` key. */
export const STREAM_FLAG_MAX_SCAN = 1024 * 1024;

// used by relay/answer/answer-usage.ts (and a test)
/**
 * The most of an answer's `"usage"` object kept (from its `{`), to read the token counts from: an
 * OpenAI-style usage object with its details (`prompt_tokens_details`, …) is under 300 bytes.
 */
export const USAGE_TAIL_BYTES = 512;

// used by relay/answer/answer-usage.ts (and a test)
/** A JSON answer longer than this is not looked at for its usage (docs/operations.md#llm-token-usage). */
export const USAGE_JSON_MAX_BYTES = 1024 * 1024;

// used by data/shared-auth-limiter.ts (and a test)
/** The window in which an address's authentication failures are counted (and it stays refused). */
export const AUTH_FAILURE_WINDOW_S = 60;

// used by gateway/gateway.ts
/** Cell sets of the limit table beyond twice the limited tokens at start: room for the limited
 *  tokens a reload adds (544 bytes each; a reload that needs more is refused: restart). */
export const LIMIT_TABLE_SPARE = 256;

// used by limits/store/limit-store.ts
/** A lease of requests unused this long after its grant is given back to the store (bounds the overshoot). */
export const LIMIT_STORE_LEASE_MS = 1000;

// used by limits/store/limit-store.ts
/** A gateway not heard of this long loses its slots of `concurrent` and its reservations in the store. */
export const LIMIT_STORE_GONE_MS = 5000;

// used by gateway/gateway.ts, limits/store/limit-store.ts
/** A store command not answered in this long counts as a failure (the store is then down until one succeeds). */
export const LIMIT_STORE_COMMAND_MS = 1000;

// used by data/shared-auth-limiter.ts (and a test)
/** Failures from one address within the window after which it gets `429 too_many_requests`. */
export const AUTH_FAILURE_LIMIT = 20;

// ── Replicas' connections ──────────────────────────────────────────────────────────────────────────

// used by time/ticker.ts, upstream/connection.ts (and a test)
/** Tick length: every deadline fires between its value and its value plus two ticks. */
export const TICK_MS = 100;

// used by control/service/load-fetch.ts, upstream/connection.ts
/** How long an idle connection is kept when the replica sends no `Keep-Alive: timeout` hint (below
 *  the 5 s idle timeout of common servers: uvicorn, Node's http). */
export const UPSTREAM_KEEP_ALIVE_MS = 4_000;

// used by control/service/load-fetch.ts, upstream/connection.ts
/** With a hint of T seconds, an idle connection is closed before T*1000 - this (and the ticks). */
export const UPSTREAM_KEEP_ALIVE_MARGIN_MS = 500;

// used by upstream/connection.ts, upstream/request-framing.ts
/** A whole body up to this size is copied next to the head for one write; a larger one goes in a
 *  corked second write instead of being copied. */
export const JOIN_LIMIT = 16 * 1024;

// used by upstream/pool.ts (and a test)
/** New connections opened synchronously per turn of the event loop; more wait for the next turn. */
export const CONNECTS_PER_TURN = 32;

// used by http/response-parser.ts (and a test)
/** The largest response head accepted: status line and header fields, CRLFs included (each 1xx too). */
export const MAX_HEAD_BYTES = 64 * 1024;

// ── Replicas and the queue ─────────────────────────────────────────────────────────────────────────

// used by replicas/affinity-ring.ts (and a test)
/** Points per replica: with 128 the largest share of 4 replicas is within about 10 % of a quarter. */
export const POINTS_PER_REPLICA = 128;

// used by control/service/start-estimate.ts
/** Measured starts a service's expected start is the median of: a few, so it follows a change soon
 *  (docs/architecture.md#the-expected-start). */
export const START_SAMPLES = 8;

// ── Kubernetes ─────────────────────────────────────────────────────────────────────────────────────

// used by control/kinds/kubernetes/watch-request.ts (and tests)
/**
 * A watch the API server answered (200) that stays up this long is working, even without a line
 * (the API server sends a bookmark about once a minute). A watch open this long, answered or not
 * (a Node.js server sends the status line of a silent watch only with its first line), is resumed
 * at once when it ends or breaks. One that ends or breaks sooner is a failure, so an API server or
 * proxy that accepts watches and cuts them at once is retried with a backoff, not in a loop.
 */
export const WATCH_HELD_MS = 1_000;

// ── Logs ───────────────────────────────────────────────────────────────────────────────────────────

// used by log/logger.ts (and a test)
/** Log lines are written in batches (log/logger.ts LOG_BATCH_BYTES), or at least this often, so a quiet gateway's lines are not held back. */
export const LOG_FLUSH_EVERY_MS = 250;

// ── The overview page ──────────────────────────────────────────────────────────────────────────────

// used by admin/page.ts, admin/status.ts
/** The status page's sampler reads the counters this often; every figure is a difference of samples. */
export const SAMPLE_INTERVAL_MS = 1000;

// ── Per-service timings (overridable in tests) ──────────────────────────────────────────────────────

// used by control/service/ejections.ts, data/replica-view.ts
/**
 * Consecutive failures of a replica before its status line (connection refused, reset, or the
 * status-line deadline missed) that eject it from rotation (control/service/ejections.ts). Fewer
 * than Envoy's 5: a request to a model server is long and costly, a reset one is not retried, and
 * a false ejection is bounded (half the replicas at most, probation, a 30 s backoff).
 */
export const EJECT_AFTER_FAILURES = 3;

// used by control/service/health.ts (and a test)
/**
 * The readiness poll keeps its fastest rate (`readinessPollMs`) from this long before a start's
 * expected time (its service's recent starts) to twice this after it.
 */
export const READY_NEAR_MS = 1_000;

// used by relay/body/body-fields.ts, relay/body/caller-body.ts, relay/model-router.ts, relay/request-filter.ts
/**
 * How much of a router's request body is read, at most, to find its `"model"` before the request
 * goes on (docs/api.md#routers): a chat body is far smaller; a longer body must name its model in
 * these bytes. Held like a chunked upload (counted in the router's account of held bodies).
 */
export const ROUTER_MODEL_BYTES = 1024 * 1024;

// ── Traces (config/tracing-config.ts: the defaults of the batch span processor's sizes) ──────────

// used by config/tracing-config.ts and tracing/span-export.ts's test
/**
 * The spans a data plane thread keeps waiting for export, at most, unless `tracing.maxQueueSize`
 * or `OTEL_BSP_MAX_QUEUE_SIZE` say otherwise: the OpenTelemetry SDK's batch span processor's
 * default queue. Past it, a finished request's spans are dropped and counted
 * (`sluice_trace_spans_dropped_total{reason="queue_full"}`): a collector that is down or slow
 * costs at most this many spans of memory per thread, never requests.
 */
export const TRACE_QUEUE_SPANS = 2048;

// used by config/tracing-config.ts and tracing/span-export.ts's test
/** The spans sent in one export, at most (the SDK's default batch; `tracing.maxExportBatchSize`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`); one export is in flight at a time. */
export const TRACE_BATCH_SPANS = 512;

// used by config/tracing-config.ts
/**
 * How long finished spans may wait for a batch to fill before they are sent anyway
 * (`tracing.scheduleDelayMs`, `OTEL_BSP_SCHEDULE_DELAY`): shorter than the SDK's 5 s, so a trace
 * is seen about a second after its request ends.
 */
export const TRACE_EXPORT_DELAY_MS = 1000;
