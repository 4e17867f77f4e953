// Sluice's internal tunables in one place: the sizes, limits and timings that shape its behaviour
// but are not part of the configuration. Each says what it bounds and why it has its value; the
// module that uses it says how. Per-service replica timings that tests shorten field by field are
// `DEFAULT_TUNING` (control/service/tuning.ts) and `DEFAULT_KUBERNETES_TUNING`
// (control/kinds/kubernetes/kubernetes-source.ts), built from REPLICA_TIMINGS and
// KUBERNETES_TIMINGS below.

// ── The caller's request and answer ────────────────────────────────────────────────────────────────

// used by relay/body/caller-body.ts
/** How many bytes may wait for a connection before the caller's socket is paused. */
export const QUEUE_HIGH_WATER = 256 * 1024;

// used by relay/body/caller-body.ts
/**
 * The same while the request waits in the service's queue: lower, since a thousand requests may
 * wait. The socket is not paused below it, so a caller that leaves while queued is noticed at
 * once (a paused socket is not read, and its close would only be seen on resume).
 */
export const HOLD_HIGH_WATER = 64 * 1024;

// used by relay/body/caller-body.ts
/**
 * After an answer that came before the whole body, the most of the body's rest that is still read
 * and dropped so the connection can serve the next request. Only a declared rest this small is
 * read: uWS renews its 10 s idle timer only after 160 KB have arrived, so reading at most this
 * much ends within about two of its timeouts however slowly the caller sends.
 */
export const DRAIN_MAX_BYTES = 128 * 1024;

// used by relay/body/stream-request.ts
/** The most of a body walked for its `stream` key. */
export const STREAM_FLAG_MAX_SCAN = 1024 * 1024;

// used by relay/answer/answer-usage.ts
/**
 * The most of an answer's `"usage"` object kept (from its `{`), to read the token counts from: an
 * OpenAI-style usage object with its details (`prompt_tokens_details`, …) is under 300 bytes.
 */
export const USAGE_TAIL_BYTES = 512;

// used by relay/answer/answer-usage.ts
/** A JSON answer longer than this is not looked at for its usage (docs/operations.md#llm-token-usage). */
export const USAGE_JSON_MAX_BYTES = 1024 * 1024;

// used by relay/answer/waiting-comments.ts
/** The most of a replica's answer that goes into the error event's message. */
export const ANSWER_MESSAGE_MAX = 4096;

// used by http/errors.ts
/** How long a caller refused while the gateway drains should wait before trying again (seconds). */
export const DRAINING_RETRY_AFTER_S = 5;

// used by data/shared-auth-limiter.ts
/** The window in which an address's authentication failures are counted (and it stays refused). */
export const AUTH_FAILURE_WINDOW_S = 60;

// used by gateway/gateway.ts
/** Cell sets of the limit table beyond twice the limited tokens at start: room for the limited
 *  tokens a reload adds (544 bytes each; a reload that needs more is refused: restart). */
export const LIMIT_TABLE_SPARE = 256;

// used by gateway/gateway.ts
/** How often the control plane keeps idle tokens' arrival times in the limit table's range (limits/limit-control.ts). */
export const LIMIT_SWEEP_MS = 60_000;

// used by relay/request/request-limits.ts
/** The longest a request waits for the shared limit store's top-up of its token's lease; then `onStoreDown`. */
export const LIMIT_STORE_WAIT_MS = 50;

// used by limits/store/limit-store.ts (docs/architecture.md#the-shared-store)
/** How often the control plane syncs every limited token with the shared store (tokens counted, slots given back, stale leases returned). */
export const LIMIT_STORE_SYNC_MS = 100;
/** A lease of requests unused this long after its grant is given back to the store (bounds the overshoot). */
export const LIMIT_STORE_LEASE_MS = 1000;
/** A gateway not heard of this long loses its slots of `concurrent` and its reservations in the store. */
export const LIMIT_STORE_GONE_MS = 5000;
/** A store command not answered in this long counts as a failure (the store is then down until one succeeds). */
export const LIMIT_STORE_COMMAND_MS = 1000;

// used by data/shared-auth-limiter.ts
/** Failures from one address within the window after which it gets `429 too_many_requests`. */
export const AUTH_FAILURE_LIMIT = 20;

// ── Replicas' connections ──────────────────────────────────────────────────────────────────────────

// used by time/ticker.ts
/** Tick length: every deadline fires between its value and its value plus two ticks. */
export const TICK_MS = 100;

// used by upstream/connection.ts and control/service/load-fetch.ts
/** How long an idle connection is kept when the replica sends no `Keep-Alive: timeout` hint (below
 *  the 5 s idle timeout of common servers: uvicorn, Node's http). */
export const UPSTREAM_KEEP_ALIVE_MS = 4_000;

// used by upstream/connection.ts and control/service/load-fetch.ts
/** With a hint of T seconds, an idle connection is closed before T*1000 - this (and the ticks). */
export const UPSTREAM_KEEP_ALIVE_MARGIN_MS = 500;

// used by upstream/connection.ts and upstream/request-framing.ts
/** A whole body up to this size is copied next to the head for one write; a larger one goes in a
 *  corked second write instead of being copied. */
export const JOIN_LIMIT = 16 * 1024;

// used by upstream/pool.ts
/** New connections opened synchronously per turn of the event loop; more wait for the next turn. */
export const CONNECTS_PER_TURN = 32;

// used by http/response-parser.ts
/** The largest response head accepted: status line and header fields, CRLFs included (each 1xx too). */
export const MAX_HEAD_BYTES = 64 * 1024;

// used by http/response-parser.ts
/** The longest chunk-size line (size, extensions, CRLF) accepted. */
export const MAX_CHUNK_LINE_BYTES = 4 * 1024;

// used by data/replica-view.ts
/** How long a TCP connect to a replica may take before it counts as unreachable. */
export const CONNECT_TIMEOUT_MS = 10_000;

// ── Replicas and the queue ─────────────────────────────────────────────────────────────────────────

// used by data/replica-view.ts
/** Wake messages of one thread for a cold service: at most one per this many ms. */
export const WAKE_EVERY_MS = 100;

// used by replicas/affinity-ring.ts
/** Points per replica: with 128 the largest share of 4 replicas is within about 10 % of a quarter. */
export const POINTS_PER_REPLICA = 128;

// used by control/service/demand.ts
/** Retry-After (seconds) for `queue_full`: the queue moves as soon as replicas free up. */
export const QUEUE_FULL_RETRY_AFTER_S = 1;

// used by control/service/demand.ts
/** Retry-After (seconds) for `no_replica` after the wait ran out. */
export const WAIT_EXPIRED_RETRY_AFTER_S = 5;

// used by control/service/start-estimate.ts
/** Measured starts a service's expected start is the median of: a few, so it follows a change soon
 *  (docs/architecture.md#the-expected-start). */
export const START_SAMPLES = 8;

// used by control/kinds/kubernetes/endpoint-replicas.ts
/** How often the service's demand is reported to the source besides each enqueue. */
export const DEMAND_REPORT_MS = 200;

// used by control/service/load-reader.ts
/** A reading older than this many intervals is stale. */
export const LOAD_STALE_INTERVALS = 3;

// used by control/service/load-reader.ts
/** The longest a reading may take (or twice the interval, if shorter). */
export const LOAD_READ_MAX_TIMEOUT_MS = 10_000;

// used by control/service/load-fetch.ts
/**
 * An exposition larger than this fails the reading: its body is read no further and its socket is
 * destroyed (vLLM's, histograms included, is well under 1 MiB). docs/configuration.md#the-model-servers-own-queue
 */
export const LOAD_READ_MAX_BYTES = 1024 * 1024;

// used by control/service/metric-scanner.ts
/** Lines longer than this (in bytes, without the line break) are skipped, never copied or split. */
export const LOAD_LINE_MAX_BYTES = 4 * 1024;

// used by control/service/metric-scanner.ts
/** Series of one metric read per reading; samples beyond are counted as ignored. */
export const LOAD_MAX_SERIES = 1_000;

// used by control/sources/replica-process.ts
/** Lines longer than this are cut (the rest of the line is dropped). */
export const REPLICA_LOG_LINE_CHARS = 8 * 1024;

// used by control/sources/replica-process.ts
/** Lines kept for the log of a failed start. */
export const REPLICA_RECENT_LINES = 20;

// used by control/sources/replica-process.ts
/** After the process exits, how long to wait for the rest of its output. */
export const REPLICA_STDIO_DRAIN_MS = 100;

// used by control/sources/replica-process.ts
/** A port handed out is not handed out again for this long. */
export const PORT_QUARANTINE_MS = 60_000;

// ── Kubernetes ─────────────────────────────────────────────────────────────────────────────────────

// used by control/kinds/kubernetes/watch-request.ts
/**
 * A watch the API server answered (200) that stays up this long is working, even without a line
 * (the API server sends a bookmark about once a minute). A watch open this long, answered or not
 * (a Node.js server sends the status line of a silent watch only with its first line), is resumed
 * at once when it ends or breaks. One that ends or breaks sooner is a failure, so an API server or
 * proxy that accepts watches and cuts them at once is retried with a backoff, not in a loop.
 */
export const WATCH_HELD_MS = 1_000;

// used by control/kinds/kubernetes/endpoint-watch.ts
/** Stopping the watch waits this long for its loop, not for a list call the API server leaves hanging. */
export const WATCH_STOP_WAIT_MS = 1_000;

// used by control/kinds/kubernetes/idle-lease.ts
/** The Lease is written at most this often by one gateway, whatever idleTimeoutMs is. */
export const LEASE_MIN_RENEW_MS = 250;

// ── Threads ────────────────────────────────────────────────────────────────────────────────────────

// used by gateway/worker-pool.ts
/** A replacement waits this long, doubling per quick death up to 5 s (a crash loop backs off). */
export const WORKER_RESPAWN_BASE_MS = 100;

// used by gateway/worker-pool.ts
/** The longest wait before replacing a worker that keeps dying. */
export const WORKER_RESPAWN_MAX_MS = 5_000;

// used by gateway/worker-pool.ts
/** How long closing waits for a worker thread to exit. */
export const WORKER_CLOSE_WAIT_MS = 5_000;

// used by gateway/worker-pool.ts
/** A worker alive this long resets its quick-death count. */
export const WORKER_STABLE_MS = 10_000;

// ── Logs ───────────────────────────────────────────────────────────────────────────────────────────

// used by log/transport.ts
/** A worker posts its log lines to the main thread per this many bytes, or per turn of its loop. */
export const WORKER_LOG_BATCH_BYTES = 4096;

// used by log/logger.ts
/** Log text is written in batches of this many bytes… */
export const LOG_BATCH_BYTES = 16 * 1024;

// used by log/logger.ts
/** …gathered in a buffer this large (room for a batch and the line that completes it). */
export const LOG_BATCH_CAPACITY = 32 * 1024;

// used by log/logger.ts
/** sonic-boom's largest single write (its default, 16 KiB, must stay above minLength). */
export const LOG_MAX_WRITE = 64 * 1024;

// used by log/logger.ts
/** …or at least this often, so a quiet gateway's lines are not held back. */
export const LOG_FLUSH_EVERY_MS = 250;

// used by cli/serve.ts
/** Before an exit, the log destination's flush is waited for this long at most. */
export const LOG_EXIT_FLUSH_MS = 1_000;

// ── The overview page ──────────────────────────────────────────────────────────────────────────────

// used by admin/status.ts
/** The status page's sampler reads the counters this often; every figure is a difference of samples. */
export const SAMPLE_INTERVAL_MS = 1000;

// used by admin/status.ts
/** Five minutes of one-second samples. */
export const STATUS_HISTORY_SAMPLES = 300;

// used by admin/status.ts
/** Requests per second are averaged over this many samples (10 s). */
export const STATUS_RATE_SAMPLES = 10;

// used by admin/status.ts
/** Time to first byte and errors cover the last minute. */
export const STATUS_MINUTE_SAMPLES = 60;

// used by admin/status.ts
/** A chart point's quantiles (time to first byte, to first event, between events) cover this many samples. */
export const STATUS_POINT_SAMPLES = 10;

// used by admin/page.ts
/** At most this many pages streaming at once; more get `503` (each costs a write a second). */
export const MAX_EVENT_STREAMS = 64;

// used by admin/page.ts
/** A stream whose caller has not read for this long is closed. */
export const STALLED_STREAM_MS = 30_000;

// ── Per-service timings (overridable in tests) ──────────────────────────────────────────────────────

/**
 * Consecutive failures of a replica before its status line (connection refused, reset, or the
 * status-line deadline missed) that eject it from rotation (control/service/ejections.ts). Fewer
 * than Envoy's 5: a request to a model server is long and costly, a reset one is not retried, and
 * a false ejection is bounded (half the replicas at most, probation, a 30 s backoff).
 */
export const EJECT_AFTER_FAILURES = 3;

// used by control/service/health.ts
/**
 * The readiness poll keeps its fastest rate (`readinessPollMs`) from this long before a start's
 * expected time (its service's recent starts) to twice this after it.
 */
export const READY_NEAR_MS = 1_000;

/** The control plane's replica timings: `DEFAULT_TUNING` in control/service/tuning.ts, which says what each is. */
export const REPLICA_TIMINGS = {
  readinessPollMs: 10,
  probeIntervalMs: 2_000,
  recoveryProbeMs: 500,
  probeTimeoutMs: 2_000,
  backoffBaseMs: 250,
  backoffMaxMs: 5_000,
  stableMs: 10_000,
  stopGraceMs: 5_000,
  poolCloseMs: 1_000,
  ejectionBaseMs: 30_000,
  ejectionMaxMs: 300_000,
  ejectionResetMs: 600_000,
} as const;

/** The Kubernetes source's timings: `DEFAULT_KUBERNETES_TUNING` in control/kinds/kubernetes/kubernetes-source.ts. */
export const KUBERNETES_TIMINGS = {
  backoffBaseMs: 250,
  backoffMaxMs: 10_000,
  watchTimeoutSeconds: 300,
  watchStallMs: 330_000,
  probeIntervalMs: 200,
  probeTimeoutMs: 2_000,
  scaleCacheMs: 2_000,
  callTimeoutMs: 10_000,
} as const;

// used by relay/body-model.ts and relay/model-router.ts
/**
 * How much of a router's request body is read, at most, to find its `"model"` before the request
 * goes on (docs/api.md#routers): a chat body is far smaller; a longer body must name its model in
 * these bytes. Held like a chunked upload (counted in the router's account of held bodies).
 */
export const ROUTER_MODEL_BYTES = 1024 * 1024;

// used by relay/body-model.ts
/** The longest model name read from a body (a longer value is no model any service serves). */
export const MODEL_NAME_MAX_BYTES = 1024;
