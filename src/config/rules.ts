// The config's vocabulary: limits, defaults, each rule in words, and the
// building blocks of the schema (schema.ts, replicas-schema.ts). Every check of a leaf carries the
// same rule text, so whatever is wrong (type, range, format) the problem names the one rule the
// value must follow.
import { z } from 'zod';
import { STORE_RULE } from './redis-store.js';

// ---------------------------------------------------------------------------------------------
// Limits and vocabularies

/** The longest delay `setTimeout` honours; a longer one fires at once (Node warns and uses 1 ms). */
export const MAX_DURATION_MS = 2_147_483_647;
/** The shortest `queue.keepAliveMs`: the keep-alive comments go out on a 100 ms tick. */
export const MIN_KEEP_ALIVE_MS = 100;
/** The largest `sessions.maxMessageBytes`: the front end takes messages up to twice the largest (src/relay/session/). */
export const MAX_SESSION_MESSAGE_BYTES = 536_870_912;

export const SLUG_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
export const HEX64_RE = /^[0-9a-fA-F]{64}$/;
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Segments of RFC 3986 unreserved characters. */
export const BASE_PATH_RE = /^(\/[A-Za-z0-9\-._~]+)*$/;
/** Visible ASCII, no `#`: a path (and optional query) a probe can send as is. */
export const READY_PATH_RE = /^\/[\x21\x22\x24-\x7e]*$/;
/** Kubernetes names: an RFC 1123 label (namespaces, port names), an RFC 1035 label (Services), and
 *  an RFC 1123 subdomain (Deployments; 253 at most). */
export const DNS_LABEL_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const DNS_1035_LABEL_RE = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** A classic Prometheus metric name (what `replicas.load` looks for). */
export const METRIC_NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
export const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Always forwarded to the replica; listing them in forwardHeaders is redundant. */
export const ALWAYS_FORWARDED = new Set(['content-type', 'accept']);

/** Headers a service may not forward from the caller, and why. */
export const NOT_FORWARDABLE: ReadonlyMap<string, string> = new Map([
  ['authorization', 'a caller credential for Sluice, never sent upstream'],
  ['proxy-authorization', 'a caller credential, never sent upstream'],
  ['cookie', 'a caller credential, never sent upstream'],
  ['host', 'set by Sluice to the replica’s host'],
  ['content-length', 'framing is chosen by Sluice'],
  ['transfer-encoding', 'framing is chosen by Sluice'],
  ['x-request-id', 'set by Sluice to its own request id'],
  ['accept-encoding', 'set by Sluice to identity'],
  ['expect', 'handled by Sluice; the upstream client refuses it'],
  ['connection', 'a hop-by-hop header'],
  ['keep-alive', 'a hop-by-hop header'],
  ['proxy-connection', 'a hop-by-hop header'],
  ['te', 'a hop-by-hop header'],
  ['trailer', 'a hop-by-hop header'],
  ['upgrade', 'a hop-by-hop header'],
  ['x-sluice-priority', 'read by Sluice (the request\'s place in the queue), never forwarded'],
  ['x-sluice-max-wait-ms', 'read by Sluice (the request\'s wait in the queue), never forwarded'],
]);

/** Headers Sluice reads itself, which cannot be the affinity header. */
export const READ_BY_SLUICE: ReadonlySet<string> = new Set([
  'authorization',
  'content-type',
  'accept',
  'host',
  'content-length',
  'transfer-encoding',
  'x-sluice-priority',
  'x-sluice-max-wait-ms',
]);

/** Token priorities, and what `X-Sluice-Priority` may lower a request to. */
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;

// Defaults.
export const DEFAULTS = {
  host: '127.0.0.1',
  port: 8080,
  workers: 0,
  basePath: '/api/v1/services',
  drainTimeoutMs: 30_000,
  logLevel: 'info',
  maxRequestBytes: 104_857_600,
  responseHeadersMs: 1_200_000,
  bodyIdleMs: 300_000,
  queueMaxRequests: 1000,
  uploadsBufferBytes: 1_048_576,
  sessionMaxMessageBytes: 16_777_216,
  sessionMaxMs: 3_600_000,
  queueMaxWaitMs: 600_000,
  queueKeepAliveMs: 0,
  startTimeoutMs: 600_000,
  min: 0,
  max: 1,
  idleTimeoutMs: 300_000,
  keepAliveMaxMs: 0,
  concurrency: 0,
  priority: 0,
  affinityMaxLoad: 1.25,
  prefixBlockBytes: 256,
  prefixMaxBlocks: 64,
  prefixIndexSize: 8192,
  loadPath: '/metrics',
  loadIntervalMs: 250,
  cacheUsageHigh: 0.9,
  limitsPrefix: 'sluice:',
  onStoreDown: 'allow',
  units: 1,
} as const;

// ---------------------------------------------------------------------------------------------
// Rules, in words: each is the `rule` of a problem.

export const RULE = {
  root: 'must be an object with a services list',
  object: 'must be an object',
  host: 'must be a host name or IP address (no scheme, port or path)',
  port: 'must be an integer from 0 to 65535 (0 = any free port)',
  file: 'must be a non-empty file path',
  certFile: 'must be a readable PEM file: the certificate, then any intermediate certificates',
  keyFile: 'must be a readable, unencrypted PEM private key matching certFile',
  workers: 'must be an integer from 0 to 64 (0 = one per CPU the process may use, within its cgroup CPU quota)',
  basePath: "must be \"\" or /-separated segments of letters, digits, '-', '.', '_' or '~' (no '.' or '..' segment)",
  duration: `must be an integer ≥ 1 and ≤ ${MAX_DURATION_MS} (milliseconds)`,
  logLevel: `must be one of ${LOG_LEVELS.join(', ')}`,
  services: 'must be a non-empty list of services',
  slug: "must be 1 to 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
  slugUnique: 'must be unique',
  tokens: 'must be a list of { name, sha256, priority }',
  routerTokens: 'must be a non-empty list of { name, sha256, priority }',
  tokenName: 'must be a non-empty string',
  adminTokens: 'must be a non-empty list of { name, sha256 }',
  tokenNameUnique: 'must be unique within the service',
  sha256: 'must be the SHA-256 digest of the token: 64 hex digits (`sluice token` prints one)',
  sha256NotToken: 'must be the SHA-256 digest of the token, not the token itself (`sluice token` prints both)',
  sha256Unique: 'must be unique within the service',
  methods: 'must be a list of HTTP method names',
  method: "must be an HTTP method name (letters, digits and !#$%&'*+-.^_`|~)",
  methodsPost: 'must include POST (POST is always relayed)',
  forwardHeaders: 'must be a list of header names',
  header: "must be a header field name (letters, digits and !#$%&'*+-.^_`|~)",
  maxRequestBytes: `must be an integer ≥ 1 and ≤ ${Number.MAX_SAFE_INTEGER} (bytes)`,
  queueMaxRequests: 'must be an integer ≥ 0 (0 = no queueing)',
  sessionMaxMessageBytes: 'must be an integer ≥ 1 and ≤ 536870912 (bytes)',
  uploadsBufferBytes: `must be an integer ≥ 0 and ≤ ${Number.MAX_SAFE_INTEGER} (bytes; 0 = never hold a chunked body)`,
  keepAliveMs: `must be 0 (off) or an integer from ${MIN_KEEP_ALIVE_MS} to ${MAX_DURATION_MS} (milliseconds)`,
  replicas: 'must be an object with urls (static replicas), command (launched replicas) or kubernetes (pods of a Deployment)',
  replicasNeither: 'is required unless replicas.command or replicas.kubernetes is set: static replicas need urls, launched replicas need command, Kubernetes-run replicas need kubernetes',
  replicasBoth: 'must not be set together with replicas.$OTHER: a service has one kind of replicas (urls, command or kubernetes)',
  urls: 'must be a non-empty list of replica URLs',
  url: 'must be http://host:port with no path, query, user info or fragment',
  urlUnique: 'must be unique',
  command: 'must be a non-empty list of non-empty strings (the program and its arguments)',
  arg: 'must be a non-empty string without NUL characters',
  env: 'must be an object of environment variable names to string values',
  envName: "must be an environment variable name (letters, digits and '_', not starting with a digit)",
  envPort: 'is set by Sluice for each replica (the port it listens on); remove it',
  envValue: 'must be a string (quote numbers and booleans in YAML) without NUL characters',
  readyPath: "must be a path beginning with '/' (visible ASCII, no '#')",
  min: 'must be an integer ≥ 0',
  max: 'must be an integer ≥ 1',
  concurrency: 'must be an integer ≥ 0 (0 = unlimited)',
  staticOnly: 'applies only to launched replicas (replicas.command); remove it for static replicas',
  keepAliveMaxMs: 'must be an integer from 0 to 2147483647 (ms; 0: X-Sluice-Keep-Alive is ignored)',
  launchedOnly: 'applies only to launched replicas (replicas.command): the idle stops it lengthens are theirs',
  kubeLaunchOnly: 'applies only to launched replicas (replicas.command); Kubernetes starts the pods, and queue.maxWaitMs bounds how long a request waits for one',
  kubernetes: 'must be { deployment, service, port } with optional namespace and kubeconfig',
  kubeNamespace: "must be a Kubernetes namespace name: 1 to 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
  kubeDeployment: "must be a Kubernetes object name: 1 to 253 lower-case letters, digits, '-' or '.', starting and ending with a letter or digit",
  kubeService: "must be a Kubernetes Service name: 1 to 63 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit",
  kubePort: "must be the Service port's name (1 to 63 lower-case letters, digits or '-', with a letter) or the pods' target port number (1 to 65535)",
  queueNeededCold: 'must be ≥ 1 when replicas.min is 0: with no queue, a request to a cold service is refused before it can start a replica, so none ever starts (or set replicas.min ≥ 1)',
  kubeconfig: 'must be a non-empty file path (a kubeconfig file)',
  unknownKey: 'unknown key',
  priority: `must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY} (higher goes first in the queue)`,
  routing: 'must be { affinityHeader, affinityMaxLoad, prefix }',
  affinityHeader: "must be a header field name (letters, digits and !#$%&'*+-.^_`|~)",
  affinityHeaderRead: 'must not be a header Sluice reads itself',
  affinityMaxLoad: 'must be a number from 1 to 100 (1.25 = a replica may take 25 % more than the mean load)',
  affinityMaxLoadAlone: 'applies only with routing.affinityHeader or routing.prefix; set one or remove this key',
  prefix: 'must be true, false, or { blockBytes, maxBlocks, indexSize }',
  prefixBlockBytes: 'must be an integer from 16 to 65536 (bytes of prompt per hashed block)',
  prefixMaxBlocks: 'must be an integer from 1 to 1024 (leading blocks of a prompt hashed at most)',
  prefixIndexSize: 'must be an integer from 256 to 1048576 (blocks remembered per replica; 8 bytes each)',
  load: 'must be { preset } or { waiting } with optional path, intervalMs, cacheUsage and cacheUsageHigh',
  loadPreset: 'must be one of vllm, sglang, tgi, llamacpp',
  loadPath: "must be a path beginning with '/' (visible ASCII, no '#')",
  loadIntervalMs: 'must be an integer from 50 to 60000 (milliseconds)',
  metricName: "must be a Prometheus metric name (letters, digits, '_' and ':', not starting with a digit)",
  loadWaitingNeeded: 'is required unless replicas.load.preset is set: the metric of the server\'s waiting requests',
  cacheUsageHigh: 'must be a number above 0 and at most 1 (a share of the cache)',
  limits: 'must be an object with any of requestsPerMinute, concurrent, tokensPerMinute, tokensPerDay, tokensPerMonth',
  requestsPerMinute: 'must be an integer from 1 to 1000000 (requests per rolling minute)',
  concurrent: 'must be an integer from 1 to 1000000 (requests in flight at once, queued ones included)',
  tokensPerMinute: 'must be an integer from 1 to 1000000000 (LLM tokens per rolling minute)',
  tokensPerDay: 'must be an integer from 1 to 1000000000 (LLM tokens per calendar day in UTC)',
  tokensPerMonth: 'must be an integer from 1 to 1000000000 (LLM tokens per calendar month in UTC)',
  limitStore: 'must be an object with optional store, storePasswordFile, storeCaFile, storeCertFile, storeKeyFile, prefix and onStoreDown',
  store: STORE_RULE,
  storePasswordFile: 'must be a readable file holding the password of limits.store (one trailing newline is not part of it), only with limits.store and no password in its URL',
  storeCaFile: 'must be a readable file of PEM CA certificates (one or more), only with a rediss:// limits.store',
  storeCertFile: 'must be a readable PEM file: the client certificate, then any intermediate certificates; only with a rediss:// limits.store and limits.storeKeyFile',
  storeKeyFile: 'must be a readable, unencrypted PEM private key, the key of limits.storeCertFile; only with a rediss:// limits.store',
  limitsPrefix: 'must be 1 to 64 visible ASCII characters',
  onStoreDown: 'must be allow or refuse',
  models: 'must be a non-empty list of model names (what a request to a router names in its body\'s "model")',
  model: 'must be a string of 1 to 256 characters',
  modelUnique: 'must be unique: a model is served by one service',
  routers: 'must be a list of { slug, tokens } with optional services and limits',
  routerServices: 'must be a non-empty list of service slugs',
  routerService: "must be a service's slug",
  routerServiceUnknown: 'must name a service of this config',
  routerServiceNoModels: 'must name a service with models (services[].models): a router finds the service by the model a request names',
  serviceUnreachable: 'must be set, or the service served by a router: a service without tokens is reachable only through routers (give it models and a router that routes to it)',
  tokenModel: 'must be a model this router serves',
  routerNoModels: 'needs a service with models (services[].models), or services naming some: without models a router can route nothing',
  cacheUsageHighAlone: 'applies only with a cache usage metric (replicas.load.cacheUsage, or a preset that has one); set it or remove this key',
  // Pools (pools-schema.ts).
  pools: 'must be a list of { name, size }',
  pool: 'must be { name, size }',
  poolName: "must be 1 to 63 lower-case letters, digits or '-', starting and ending with a letter or digit",
  poolNameUnique: 'must be unique',
  poolSize: 'must be an integer from 1 to 1024 (units, e.g. GPUs)',
  replicaPool: 'must be the name of a pool in pools',
  poolUnknown: 'must be the name of a pool in pools',
  poolLaunchedOnly: 'applies only to launched replicas (replicas.command): a pool is a set of units on this machine; static replicas run elsewhere, and Kubernetes schedules its own GPUs (nvidia.com/gpu requests)',
  replicaUnits: 'must be an integer from 1 to 1024 (units each replica holds)',
  unitsWithoutPool: 'applies only with replicas.pool; set the pool or remove this key',
  unitsPlaceholderWithoutPool: 'uses {units}, which is replaced only for a service with replicas.pool; set the pool or remove {units}',
} as const;

// ---------------------------------------------------------------------------------------------
// Schema building blocks. Every check of a leaf carries the same rule text, so whatever is wrong
// (type, range, format) the problem names the one rule the value must follow.

export function int(min: number, max: number, rule: string) {
  return z.number({ error: rule }).int({ error: rule }).min(min, { error: rule }).max(max, { error: rule }).describe(rule);
}

export const duration = () => int(1, MAX_DURATION_MS, RULE.duration);

export function nonEmptyString(rule: string) {
  return z.string({ error: rule }).min(1, { error: rule }).describe(rule);
}

export function strict<S extends z.ZodRawShape>(shape: S, rule: string = RULE.object) {
  return z.strictObject(shape, { error: rule });
}

/** Runs a cross-field check even when some fields failed, so every problem is listed at once. */
export const ALWAYS = { when: () => true };

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

