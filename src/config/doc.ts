// The config reference, generated from the schema: every key, its default and its rule, as the
// markdown table of docs/configuration.md, section "Every key" (test/config/config-doc.unit.test.ts keeps them
// equal).
//   node dist/src/config/doc.js                                  print the table
//   node dist/src/config/doc.js --write docs/configuration.md    replace the table between the markers
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configSchema } from './schema.js';

export interface ConfigKeyDoc {
  /** `services[].replicas.max` */
  key: string;
  /** The value used when the key is absent, if there is one. */
  default: { value: unknown } | undefined;
  /** Set by default only inside its section (`listen.tls.certFile` when `listen.tls` is given). */
  required: boolean;
  rule: string;
}

/** What each key does, for the table (the schema holds the rules). A test checks this list against the schema. */
export const ABOUT: Readonly<Record<string, string>> = {
  'listen.host': 'address the relay listens on (env `SLUICE_HOST`)',
  'listen.port': 'port the relay listens on (env `SLUICE_PORT`)',
  'listen.tls': 'serve HTTPS instead of HTTP',
  'listen.tls.certFile': 'certificate chain file, read at start (a renewed one needs a restart)',
  'listen.tls.keyFile': 'private key file, read at start',
  admin: '/healthz, /readyz and /metrics on their own listener only (not set: on the relay listener), plus the overview page (`/`) and `/status`, which are served only here',
  'admin.host': 'address of the operations listener',
  'admin.port': 'port of the operations listener',
  'admin.tokens': 'who may load and unload services on the admin listener (`POST /services/{slug}/load`, `/unload`): `{ name, sha256 }` as a service\'s tokens, sent as `Authorization: Bearer`; not set: those endpoints answer `401`; read at start (a change needs a restart)',
  'admin.tokens[].name': 'shown in the log lines of the loads and unloads it asks for',
  'admin.tokens[].sha256': 'SHA-256 digest of the admin token (`sluice token` makes one); the token itself is never stored',
  workers: 'front-end threads serving the relay port',
  basePath: 'prefix of every relay URL: `{basePath}/{slug}/request{path}`',
  drainTimeoutMs: 'on SIGTERM, how long streams in flight may take to finish',
  'log.level': 'lowest level logged (env `LOG_LEVEL`); `info` logs one line per request',
  'limits.store': 'not set: in the gateway, exact across its worker threads; `redis://[[username]:password@]host:port[/db]`: in that Redis, shared by every gateway naming it (keys under `limits.prefix`); `rediss://…`: the same over TLS (the certificate verified, its name checked against the host); logs show it with the password as `***`',
  'limits.storeCaFile': 'with `rediss://`: PEM file of the CA certificates to trust instead of the ones Node.js trusts (a private CA), read at start and on SIGHUP; a changed file is used from the next connection',
  'limits.storeCertFile': 'with `rediss://`: PEM file of the client certificate (then any intermediates) the gateway presents, for a Redis with `tls-auth-clients yes`; read at start and on SIGHUP, used from the next connection',
  'limits.storeKeyFile': 'the private key of `limits.storeCertFile` (unencrypted PEM), read with it',
  'limits.storePasswordFile': 'file holding the password of `limits.store` (keeps it out of the config), read at start and on SIGHUP; a changed password is used from the next connection',
  'limits.prefix': 'prefix of the keys in the shared store',
  'limits.onStoreDown': 'while the shared store cannot be reached: `allow` (requests pass, unlimited) or `refuse` (`503 limits_unavailable`); applies with the redis store',
  pools: 'sets of units (GPUs) on this machine that launched replicas take from (see "Pools")',
  'pools[].name': 'the pool’s name in `replicas.pool`, metrics and `/status`',
  'pools[].size': 'its units, numbered from 0 (`{units}` gives a replica the indices it holds)',
  services: 'the services Sluice relays to',
  'services[].slug': 'the service’s name in URLs, logs and metrics',
  'services[].tokens': 'bearer tokens that may call the service (SIGHUP reloads them); not set or empty: the service has no tokens of its own and is reachable only through routers (its own endpoint answers `401` to every token), which needs `models` and a router that routes to it',
  'services[].tokens[].name': 'shown in logs instead of the token',
  'services[].tokens[].sha256': 'SHA-256 digest of the token; the token itself is never stored',
  'services[].tokens[].limits': 'this token’s limits, replacing the service’s (`{}`: none); SIGHUP reloads them, and keeps what a token that stays has used',
  'services[].tokens[].limits.requestsPerMinute': 'requests admitted per rolling minute: a burst of up to this many, then one every 60/n s; more get `429 rate_limited`',
  'services[].tokens[].limits.concurrent': 'requests of the token in flight at once, queued ones included; more get `429 rate_limited`',
  'services[].tokens[].limits.tokensPerMinute': 'LLM tokens per rolling minute: answers’ usage plus running requests’ `max_tokens` (at most this each); a request is admitted, with its own, while they are below this',
  'services[].tokens[].limits.tokensPerDay': 'LLM tokens per calendar day in UTC (00:00 to 24:00), counted as `tokensPerMinute` is; spent, a request gets `429 rate_limited` with `Retry-After` until the next UTC midnight',
  'services[].tokens[].limits.tokensPerMonth': 'LLM tokens per calendar month in UTC, counted as `tokensPerMinute` is; spent, a request gets `429 rate_limited` with `Retry-After` until the first of the next month, 00:00 UTC',
  'services[].limits': 'limits of each token of the service that has none of its own (keys as `tokens[].limits`)',
  'services[].limits.requestsPerMinute': 'as `tokens[].limits.requestsPerMinute`, for each token without its own limits',
  'services[].limits.concurrent': 'as `tokens[].limits.concurrent`, for each token without its own limits',
  'services[].limits.tokensPerMinute': 'as `tokens[].limits.tokensPerMinute`, for each token without its own limits',
  'services[].limits.tokensPerDay': 'as `tokens[].limits.tokensPerDay`, for each token without its own limits',
  'services[].limits.tokensPerMonth': 'as `tokens[].limits.tokensPerMonth`, for each token without its own limits',
  'services[].tokens[].priority': 'place of its requests in the queue: higher first, equal ones in arrival order; `X-Sluice-Priority` may lower it per request',
  'services[].methods': 'HTTP methods relayed; others get `405`',
  'services[].forwardHeaders': 'caller headers passed to the replica besides Content-Type and Accept',
  'services[].maxRequestBytes': 'largest request body; larger gets `413`',
  'services[].timeouts.responseHeadersMs': 'wait for the replica’s status line and headers (`504` after)',
  'services[].timeouts.bodyIdleMs': 'longest silence inside the replica’s body before it is cut',
  'services[].queue.maxRequests': 'requests that may wait for a replica; more get `503 queue_full`',
  'services[].queue.maxWaitMs': 'longest wait in the queue; then `503 no_replica` (`X-Sluice-Max-Wait-Ms` may lower it per request)',
  'services[].queue.keepAliveMs': 'a request for a streamed answer still waiting for the replica after this long gets `200 text/event-stream` and a `: waiting for a replica` comment this often (see "Keeping streamed requests alive"); 0 = off',
  'services[].uploads.bufferBytes': 'a chunked body up to this size is read whole and sent to the replica with `Content-Length` (see "Chunked uploads"); a longer one streams chunked once it passes this; 0 = never hold, stream every chunk at once',
  'services[].sessions.maxMessageBytes': 'largest WebSocket message of a realtime session, either way; a larger one closes the session with `1009` (api.md, "Realtime sessions")',
  'services[].sessions.maxMs': 'longest realtime session; then it is closed with `1008` (its idle time-out is `timeouts.bodyIdleMs`)',
  'services[].routing.affinityHeader': 'requests with the same value of this header go to the same replica (its prompt cache), within `affinityMaxLoad`; forwarded only if in `forwardHeaders`',
  'services[].routing.affinityMaxLoad': 'a session (or a prefix, with `prefix`) moves to the next replica while its own carries more than this times the mean load',
  'services[].routing.prefix': 'prefix-aware routing: a request goes to the replica that was sent the most leading blocks of its prompt (its model server\'s prompt cache), within `affinityMaxLoad`, with no header from the caller (see "Prefix-aware routing"); `true` = the defaults below',
  'services[].routing.prefix.blockBytes': 'bytes of the prompt (normalized JSON of `messages`, `prompt`, `input`, `instructions`, `tools`) per hashed block; only whole blocks count',
  'services[].routing.prefix.maxBlocks': 'leading blocks of a prompt hashed at most (`blockBytes` × this = the longest prefix told apart)',
  'services[].routing.prefix.indexSize': 'block hashes each replica\'s index remembers (least recently sent forgotten first); shared memory of 8 bytes each per replica slot',
  'services[].replicas.urls': 'replicas running elsewhere (static)',
  'services[].replicas.command': 'program and arguments Sluice starts for each replica (launched); `{port}` becomes its port',
  'services[].replicas.kubernetes': 'replicas are the pods behind a Kubernetes Service, of a Deployment Sluice scales (see "Kubernetes replicas")',
  'services[].replicas.kubernetes.namespace': 'namespace of the Deployment, the Service and the Lease; default: the pod’s own, else the kubeconfig context’s, else `default`',
  'services[].replicas.kubernetes.deployment': 'the Deployment whose `spec.replicas` Sluice raises on demand and lowers to `min` when idle',
  'services[].replicas.kubernetes.service': 'the Service whose EndpointSlices list the replicas',
  'services[].replicas.kubernetes.port': 'the EndpointSlice port (name or number) requests go to',
  'services[].replicas.kubernetes.kubeconfig': 'credentials file; default: the pod’s service account, else `$KUBECONFIG`',
  'services[].replicas.env': 'added to the environment Sluice passes to launched replicas (with `PORT`)',
  'services[].replicas.readyPath': 'probed with GET until 2xx; without it, ready when the port accepts',
  'services[].replicas.startTimeoutMs': 'longest a launched replica may take to become ready',
  'services[].replicas.min': 'launched replicas kept running when idle (Kubernetes: the idle `spec.replicas`)',
  'services[].replicas.max': 'most launched replicas at once (Kubernetes: highest `spec.replicas` Sluice sets)',
  'services[].replicas.keepAliveMaxMs': 'the longest a request\'s `X-Sluice-Keep-Alive` may keep the launched replica that served it from its idle stop (longer asks count as this); 0: the header is ignored',
  'services[].replicas.idleTimeoutMs': 'a launched replica idle this long is stopped, down to `min` (Kubernetes: no gateway relayed for this long)',
  'services[].replicas.concurrency': 'requests in flight per replica; more wait in the queue',
  'services[].replicas.load': 'choose replicas by the model server’s own queue, read from its Prometheus endpoint (not set: by requests in flight)',
  'services[].replicas.load.preset': 'metric names of vLLM, SGLang, TGI or llama.cpp (see "Choosing a replica"); explicit names override',
  'services[].replicas.load.path': 'the replicas’ Prometheus endpoint',
  'services[].replicas.load.intervalMs': 'how often each ready replica is read; a reading older than three intervals is not used',
  'services[].replicas.load.waiting': 'metric of the server’s waiting requests, summed over its series',
  'services[].replicas.load.cacheUsage': 'metric of the server’s cache usage, 0 to 1 (the highest of its series)',
  'services[].replicas.load.cacheUsageHigh': 'a replica at or above this cache usage is chosen only when every other is too',
  'services[].replicas.pool': 'launched replicas start only on free units of this pool; `{units}` in `command` or `env` becomes the indices they hold (see "Pools")',
  'services[].replicas.units': 'units of `replicas.pool` each replica holds, from before its process is spawned until it has exited',
  'services[].models': 'model names this service serves: a router’s request whose body names one goes here (see "Many models behind one endpoint"); SIGHUP reloads them',
  routers: 'endpoints of their own that choose the service by the JSON body’s `"model"` (see "Many models behind one endpoint")',
  'routers[].slug': 'the router’s name in URLs: `{basePath}/{slug}/request{path}`',
  'routers[].tokens': 'bearer tokens that may call the router (keys as `services[].tokens`; a service’s tokens do not open the router, nor the router’s a service); SIGHUP reloads them',
  'routers[].tokens[].name': 'shown in logs instead of the token',
  'routers[].tokens[].sha256': 'SHA-256 digest of the token',
  'routers[].tokens[].priority': 'place of its requests in the chosen service’s queue, as a service token’s',
  'routers[].tokens[].models': 'the router’s models this token may use (not set: every one); to it, any other is `404 model_not_found` as a model that does not exist, and `GET …/v1/models` lists only these',
  'routers[].tokens[].limits': 'this token’s limits, replacing the router’s (keys as `services[].tokens[].limits`)',
  'routers[].tokens[].limits.requestsPerMinute': 'as `services[].tokens[].limits.requestsPerMinute`, over every service of the router',
  'routers[].tokens[].limits.concurrent': 'as `services[].tokens[].limits.concurrent`, over every service of the router',
  'routers[].tokens[].limits.tokensPerMinute': 'as `services[].tokens[].limits.tokensPerMinute`, over every service of the router',
  'routers[].tokens[].limits.tokensPerDay': 'as `services[].tokens[].limits.tokensPerDay`, over every service of the router',
  'routers[].tokens[].limits.tokensPerMonth': 'as `services[].tokens[].limits.tokensPerMonth`, over every service of the router',
  'routers[].limits': 'limits of each token of the router that has none of its own',
  'routers[].limits.requestsPerMinute': 'as `tokens[].limits.requestsPerMinute`, for each token without its own limits',
  'routers[].limits.concurrent': 'as `tokens[].limits.concurrent`, for each token without its own limits',
  'routers[].limits.tokensPerMinute': 'as `tokens[].limits.tokensPerMinute`, for each token without its own limits',
  'routers[].limits.tokensPerDay': 'as `tokens[].limits.tokensPerDay`, for each token without its own limits',
  'routers[].limits.tokensPerMonth': 'as `tokens[].limits.tokensPerMonth`, for each token without its own limits',
  'routers[].services': 'the services whose models it routes to (not set: every service with `models`)',
  tracing: 'send traces of the relayed requests to an OpenTelemetry collector (see "Traces" in operations.md); not set, and no `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`: off. The `OTEL_*` variables fill what this does not set; `OTEL_SDK_DISABLED=true` turns it off; SIGHUP reloads it',
  'tracing.endpoint': 'the OTLP/HTTP receiver spans are posted to, e.g. `http://collector:4318/v1/traces` (a URL without a path gets `/v1/traces`); else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`',
  'tracing.protocol': 'OTLP encoding: `http/protobuf` (default) or `http/json`; else `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`',
  'tracing.headers': 'headers sent with every export (a collector’s API key); merged over `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS`',
  'tracing.sampleRatio': 'share of requests traced when the caller sent no `traceparent` (a caller’s sampled flag decides for its own: parent-based); default 1, or as `OTEL_TRACES_SAMPLER(_ARG)` say',
  'tracing.serviceName': '`service.name` of the spans; else `OTEL_SERVICE_NAME`, else a `service.name` in `OTEL_RESOURCE_ATTRIBUTES` (whose other attributes join the spans’ resource), else `sluice`',
  'tracing.genAiProvider': '`gen_ai.provider.name` of the spans of OpenAI-style requests: the provider whose API the replicas speak, as OpenTelemetry’s GenAI conventions name it (`azure.ai.openai`, `groq`, …; a self-hosted vLLM or SGLang serves the OpenAI API); default `openai`',
  'tracing.scheduleDelayMs': 'how long finished spans may wait for a batch to fill before they are sent anyway, ms; else `OTEL_BSP_SCHEDULE_DELAY`, else 1000 (the SDK’s is 5000)',
  'tracing.maxQueueSize': 'spans a data plane thread keeps waiting for export, at most (more are dropped and counted: memory stays bounded); else `OTEL_BSP_MAX_QUEUE_SIZE`, else 2048',
  'tracing.maxExportBatchSize': 'spans sent in one export, at most (at most `maxQueueSize`); else `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, else 512',
  'tracing.exportTimeoutMs': 'how long one export may take before its spans are counted lost, ms; else `OTEL_BSP_EXPORT_TIMEOUT`, else 30000; the exporter’s `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` (default 10000) bounds it too, the shorter winning',
};

/** Where the table lives: the markers in that file enclose it. */
export const TABLE_FILE = 'docs/configuration.md';
export const TABLE_BEGIN = `<!-- config-table:begin (generated by \`node dist/src/config/doc.js --write ${TABLE_FILE}\`) -->`;
export const TABLE_END = '<!-- config-table:end -->';

interface SchemaNode {
  description?: string;
  _zod: { def: SchemaDef };
}

interface SchemaDef {
  type: string;
  innerType?: SchemaNode;
  in?: SchemaNode;
  defaultValue?: unknown;
  shape?: Record<string, SchemaNode>;
  element?: SchemaNode;
  options?: SchemaNode[];
}

/** Every key of the config, in schema order; lists of objects as `key[]` followed by their keys. */
export function configKeys(): ConfigKeyDoc[] {
  const rows: ConfigKeyDoc[] = [];
  visit(configSchema as unknown as SchemaNode, '', rows);
  return rows;
}

function visit(node: SchemaNode, key: string, rows: ConfigKeyDoc[]): void {
  let description: string | undefined;
  let defaultValue: { value: unknown } | undefined;
  let optional = false;
  let current = node;
  for (;;) {
    description ??= current.description;
    const def = current._zod.def;
    if ((def.type === 'prefault' || def.type === 'default') && def.innerType !== undefined) {
      defaultValue ??= { value: def.defaultValue };
      current = def.innerType;
    } else if (def.type === 'optional' && def.innerType !== undefined) {
      optional = true;
      current = def.innerType;
    } else if (def.type === 'pipe' && def.in !== undefined) {
      current = def.in;
    } else {
      break;
    }
  }
  const def = current._zod.def;
  const row = (): ConfigKeyDoc => ({ key, default: defaultValue, required: !optional && defaultValue === undefined, rule: description ?? '' });
  if (def.type === 'object' && def.shape !== undefined) {
    // A section is a row only when it says something of its own (admin, listen.tls).
    if (key !== '' && description !== undefined) rows.push(row());
    for (const [name, child] of Object.entries(def.shape)) visit(child, key === '' ? name : `${key}.${name}`, rows);
    return;
  }
  // A key that is a flag or an object of its own keys (`routing.prefix`): its row, then those keys.
  const object = def.type === 'union' ? def.options?.find(isObject) : undefined;
  if (object !== undefined) {
    rows.push(row());
    visit(object, key, rows);
    return;
  }
  if (def.type === 'array' && def.element !== undefined && isObject(def.element)) {
    rows.push(row());
    visit(def.element, `${key}[]`, rows);
    return;
  }
  rows.push(row());
}

function isObject(node: SchemaNode): boolean {
  let current: SchemaNode | undefined = node;
  while (current !== undefined) {
    const def: SchemaDef = current._zod.def;
    if (def.type === 'object') return true;
    current = def.innerType ?? (def.type === 'pipe' ? def.in : undefined);
  }
  return false;
}

function formatDefault(doc: ConfigKeyDoc): string {
  if (doc.default === undefined) return doc.required ? 'required' : 'not set';
  const v = doc.default.value;
  return `\`${typeof v === 'string' ? (v === '' ? '""' : v) : JSON.stringify(v)}\``;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The markdown table: key, default, what it does, rule. */
export function configTable(): string {
  const lines = ['| key | default | what it does | rule |', '|---|---|---|---|'];
  for (const doc of configKeys()) lines.push(`| \`${doc.key}\` | ${formatDefault(doc)} | ${cell(ABOUT[doc.key] ?? '')} | ${cell(doc.rule)} |`);
  return lines.join('\n');
}

/** `text` with the table between the markers replaced by the generated one. */
export function withTable(text: string): string {
  const begin = text.indexOf(TABLE_BEGIN);
  const end = text.indexOf(TABLE_END);
  if (begin < 0 || end < begin) throw new Error(`the markers ${TABLE_BEGIN} … ${TABLE_END} are missing`);
  return `${text.slice(0, begin + TABLE_BEGIN.length)}\n${configTable()}\n${text.slice(end)}`;
}

function main(argv: string[]): void {
  if (argv[0] === '--write' && argv[1] !== undefined) {
    writeFileSync(argv[1], withTable(readFileSync(argv[1], 'utf8')));
  } else {
    process.stdout.write(`${configTable()}\n`);
  }
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
