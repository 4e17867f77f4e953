// The validated configuration, as the rest of Sluice sees it.
// Every field is filled in: defaults are applied by the loader in load.ts, once, at start.
import type { TracingSettings } from './tracing-config.js';

export interface TokenConfig {
  /** Shown in logs instead of the token. */
  name: string;
  /** Lowercase SHA-256 hex digest of the token (64 hex digits). */
  sha256: string;
  /** Its requests' place in the queue: higher goes first (default 0). */
  priority: number;
  /** Its own limits, which replace the service's (docs/configuration.md#limits-per-caller). */
  limits?: LimitsConfig | undefined;
}

/** A router's token: a service token's keys, and the models it may use. */
export interface RouterTokenConfig extends TokenConfig {
  /** The router's models it may use; not set: every one (others are `404 model_not_found` for it). */
  models?: string[] | undefined;
}

/** `limits` of a token or a service: every key optional; absent = no limit of that kind. */
export interface LimitsConfig {
  /** Requests admitted per rolling 60 s: a burst of up to this many, then one every 60/n s. */
  requestsPerMinute?: number | undefined;
  /** Requests of the token in flight at once, queued ones included. */
  concurrent?: number | undefined;
  /** LLM tokens (prompt + completion) per rolling 60 s, settled answers plus reservations. */
  tokensPerMinute?: number | undefined;
  /** LLM tokens per calendar day in UTC (00:00 to 24:00), settled answers plus reservations. */
  tokensPerDay?: number | undefined;
  /** LLM tokens per calendar month in UTC, settled answers plus reservations. */
  tokensPerMonth?: number | undefined;
}

/** Top-level `limits`: where the counters live. */
interface LimitStoreConfig {
  /** Absent: in the gateway, exact across its worker threads. */
  store?: string | undefined;
  /** A file holding the store's password (read at start and on SIGHUP), when the URL has none. */
  storePasswordFile?: string | undefined;
  /** With rediss://: a PEM file of the CA certificates to trust (read at start and on SIGHUP). */
  storeCaFile?: string | undefined;
  /** With rediss://: the client certificate (PEM, with any intermediates) and its key, for a Redis with `tls-auth-clients yes`. */
  storeCertFile?: string | undefined;
  storeKeyFile?: string | undefined;
  /** Prefix of the store's keys. */
  prefix: string;
  /** What requests get while the store cannot be reached. */
  onStoreDown: 'allow' | 'refuse';
}

/** The model servers whose load metrics `replicas.load.preset` names. */
export type LoadPreset = 'vllm' | 'sglang' | 'tgi' | 'llamacpp';

/** `replicas.load`: read each ready replica's Prometheus endpoint to choose by its own queue. */
export interface LoadConfig {
  preset?: LoadPreset | undefined;
  /** Path of the Prometheus endpoint, from `/`. */
  path: string;
  intervalMs: number;
  /** Metric names of the server's waiting requests; the first one the server exports counts. */
  waiting: string[];
  /** Metric names of its cache usage (0 to 1); the first exported counts; empty: not read. */
  cacheUsage: string[];
  /** Metric names of the requests it is running (the preset's; shown on /status); empty: not read. */
  running: string[];
  /** A replica whose cache usage is at or above this is chosen only when every other is too. */
  cacheUsageHigh: number;
}

/** `routing`: how a request chooses among the ready replicas. */
interface RoutingConfig {
  /** Lower-case name of the header whose value keeps a session on one replica. */
  affinityHeader?: string | undefined;
  /** A session leaves its replica while that one's load exceeds this times the mean. */
  affinityMaxLoad: number;
  /** Prefix-aware routing (`routing.prefix`), or undefined: off. */
  prefix?: PrefixConfig | undefined;
}

/** `routing.prefix`: the prompt's leading blocks choose the replica that was sent them. */
export interface PrefixConfig {
  /** Bytes of the normalized prompt per hashed block. */
  blockBytes: number;
  /** Leading blocks of a prompt hashed at most. */
  maxBlocks: number;
  /** Block hashes each replica's index remembers at most. */
  indexSize: number;
}

export interface ReplicasConfig {
  /** Static replicas: base URLs (http: only, no path other than `/`, no query). */
  urls?: string[];
  /** Launched replicas: argv; `{port}` in an argument is replaced by the chosen port. */
  command?: string[];
  /** Replicas run by Kubernetes: the pods behind a Service, of a Deployment. */
  kubernetes?: KubernetesTarget;
  env: Record<string, string>;
  /** Readiness path probed with GET; must begin with `/`. */
  readyPath?: string;
  startTimeoutMs: number;
  min: number;
  max: number;
  idleTimeoutMs: number;
  /** The longest `X-Sluice-Keep-Alive` a request may ask for, in ms; 0: the header is ignored. */
  keepAliveMaxMs: number;
  /** Requests in flight per replica; 0 = unlimited. */
  concurrency: number;
  /** Read the replicas' own load (not set: choose by requests in flight). */
  load?: LoadConfig | undefined;
  /** The pool (`pools[].name`) each launched replica takes `units` from; not set: none. */
  pool?: string | undefined;
  /** Units of `pool` each replica holds (1 without a pool). */
  units: number;
}

/** `pools[]`: a set of units (GPUs) on this machine that launched replicas take from. */
export interface PoolConfig {
  name: string;
  size: number;
}

/** `replicas.kubernetes`. */
export interface KubernetesTarget {
  /** Default: the pod's own namespace, else the kubeconfig context's, else `default`. */
  namespace?: string | undefined;
  deployment: string;
  service: string;
  /** EndpointSlice port name, or number. */
  port: string | number;
  /** Default: in-cluster service account, else `$KUBECONFIG`. */
  kubeconfig?: string | undefined;
}

export interface ServiceConfig {
  slug: string;
  /** Empty: the service is reachable only through routers. */
  tokens: TokenConfig[];
  /** Upper-case HTTP methods relayed; always contains POST. */
  methods: string[];
  /** Lower-case header names forwarded from the caller in addition to content-type and accept. */
  forwardHeaders: string[];
  maxRequestBytes: number;
  timeouts: { responseHeadersMs: number; bodyIdleMs: number };
  /** `keepAliveMs`: a waiting request for a streamed answer gets `200` and comments this often (0: off). */
  queue: { maxRequests: number; maxWaitMs: number; keepAliveMs: number };
  /** `bufferBytes`: a chunked body is held up to this size and sent with Content-Length (0: never held). */
  uploads: { bufferBytes: number };
  /** WebSocket sessions (docs/api.md#realtime-sessions): the largest message either way, the longest session. */
  sessions: { maxMessageBytes: number; maxMs: number };
  routing: RoutingConfig;
  replicas: ReplicasConfig;
  /** Limits of each of its tokens that has none of its own. */
  limits?: LimitsConfig | undefined;
  /** The models it serves: a router's request naming one goes to it (unique across services). */
  models?: string[] | undefined;
}

/** `routers[]`: one endpoint for the models of several services, chosen by the body's `"model"`. */
export interface RouterConfig {
  slug: string;
  tokens: RouterTokenConfig[];
  /** Limits of each of its tokens that has none of its own. */
  limits?: LimitsConfig | undefined;
  /** The services it routes to; not set: every service with `models`. */
  services?: string[] | undefined;
}

interface ListenConfig {
  host: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
}

export interface Config {
  listen: ListenConfig;
  admin?: { host: string; port: number; tokens?: Array<{ name: string; sha256: string }> };
  /** Front-end worker threads; 0 = one per CPU. */
  workers: number;
  /** Begins with `/`, no trailing `/` (the empty string is allowed for `/`). */
  basePath: string;
  drainTimeoutMs: number;
  log: { level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent' };
  limits: LimitStoreConfig;
  /** Sets of units launched replicas take from (docs/configuration.md#pools). */
  pools: PoolConfig[];
  services: ServiceConfig[];
  routers?: RouterConfig[] | undefined;
  /** Where traces go, the config's `tracing` merged with the OTEL_* environment; undefined: tracing is off. */
  tracing?: TracingSettings | undefined;
}
