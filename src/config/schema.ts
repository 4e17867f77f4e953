// The config schema (contract section 7): every key, its default and its rule. The schema fills
// every default, normalizes values (lower-case digests and header names, upper-case methods, URL
// origins, no trailing `/` on basePath) and rejects unknown keys. Each key carries its rule in
// words (`.describe`), which is also what `config/doc.ts` prints for the README's table.
import { isIPv6 } from 'node:net';
import { z } from 'zod';
import type { Config } from '../config-types.js';
import { checkTlsFiles } from './tls.js';

// ---------------------------------------------------------------------------------------------
// Limits and vocabularies

/** The longest delay `setTimeout` honours; a longer one fires at once (Node warns and uses 1 ms). */
export const MAX_DURATION_MS = 2_147_483_647;

const SLUG_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** RFC 9110 section 5.6.2 `token`: method names and header field names. */
const TOKEN_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEX64_RE = /^[0-9a-fA-F]{64}$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Segments of RFC 3986 unreserved characters. */
const BASE_PATH_RE = /^(\/[A-Za-z0-9\-._~]+)*$/;
/** Visible ASCII, no `#`: a path (and optional query) a probe can send as is. */
const READY_PATH_RE = /^\/[\x21\x22\x24-\x7e]*$/;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Always forwarded to the replica (contract section 3); listing them in forwardHeaders is redundant. */
const ALWAYS_FORWARDED = new Set(['content-type', 'accept']);

/** Headers a service may not forward from the caller, and why. */
const NOT_FORWARDABLE: ReadonlyMap<string, string> = new Map([
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
]);

// Defaults (contract section 7).
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
  queueMaxWaitMs: 600_000,
  startTimeoutMs: 600_000,
  min: 0,
  max: 1,
  idleTimeoutMs: 300_000,
  concurrency: 0,
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
  tokens: 'must be a non-empty list of { name, sha256 }',
  tokenName: 'must be a non-empty string',
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
  replicas: 'must be an object with urls (static replicas) or command (launched replicas)',
  replicasNeither: 'is required unless replicas.command is set: static replicas need urls, launched replicas need command',
  replicasBoth: 'must not be set together with replicas.urls: static replicas need urls, launched replicas need command, not both',
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
  unknownKey: 'unknown key',
} as const;

// ---------------------------------------------------------------------------------------------
// Schema building blocks. Every check of a leaf carries the same rule text, so whatever is wrong
// (type, range, format) the problem names the one rule the value must follow.

function int(min: number, max: number, rule: string) {
  return z.number({ error: rule }).int({ error: rule }).min(min, { error: rule }).max(max, { error: rule }).describe(rule);
}

const duration = () => int(1, MAX_DURATION_MS, RULE.duration);

function nonEmptyString(rule: string) {
  return z.string({ error: rule }).min(1, { error: rule }).describe(rule);
}

function strict<S extends z.ZodRawShape>(shape: S, rule: string = RULE.object) {
  return z.strictObject(shape, { error: rule });
}

/** Runs a cross-field check even when some fields failed, so every problem is listed at once. */
const ALWAYS = { when: () => true };

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const host = z.string({ error: RULE.host }).refine(
  (h) => h.length > 0 && !/[\s/?#@[\]]/.test(h) && (!h.includes(':') || isIPv6(h)),
  { error: RULE.host },
).describe(RULE.host);

const port = int(0, 65_535, RULE.port);

const listen = strict({
  host: host.prefault(DEFAULTS.host),
  port: port.prefault(DEFAULTS.port),
  tls: strict({
    certFile: nonEmptyString(RULE.file).describe(RULE.certFile),
    keyFile: nonEmptyString(RULE.file).describe(RULE.keyFile),
  })
    .superRefine((tls, ctx) => {
      // The files are read only when both paths are valid strings (and only then: a config with
      // other problems still lists them all).
      for (const p of checkTlsFiles(tls)) ctx.addIssue({ code: 'custom', path: [p.key], input: p.value, message: p.rule });
    })
    .optional()
    .describe('must be { certFile, keyFile }, both files valid'),
});

const admin = strict({
  host: host.prefault(DEFAULTS.host),
  port,
});

const basePath = z
  .string({ error: RULE.basePath })
  .transform((p, ctx) => {
    const normalized = p.endsWith('/') ? p.slice(0, -1) : p;
    const segments = normalized.split('/').slice(1);
    if (!BASE_PATH_RE.test(normalized) || segments.some((s) => s === '.' || s === '..')) {
      ctx.addIssue({ code: 'custom', message: RULE.basePath, input: p });
      return z.NEVER;
    }
    return normalized;
  })
  .describe(RULE.basePath);

const logLevel = z
  .string({ error: RULE.logLevel })
  .transform((s) => s.toLowerCase())
  .pipe(z.enum(LOG_LEVELS, { error: RULE.logLevel }))
  .describe(RULE.logLevel);

const token = strict({
  name: nonEmptyString(RULE.tokenName),
  sha256: z.string({ error: RULE.sha256 }).transform((s, ctx) => {
    if (HEX64_RE.test(s)) return s.toLowerCase();
    // A token pasted where its digest belongs must not be echoed into error output or logs.
    if (s.startsWith('slc_')) ctx.addIssue({ code: 'custom', message: RULE.sha256NotToken, input: '[redacted]' });
    else ctx.addIssue({ code: 'custom', message: RULE.sha256, input: s });
    return z.NEVER;
  }).describe(RULE.sha256),
});

const tokens = z
  .array(token, { error: RULE.tokens })
  .min(1, { error: RULE.tokens })
  .superRefine((list, ctx) => {
    const names = new Map<string, number>();
    const digests = new Map<string, number>();
    if (!Array.isArray(list)) return;
    list.forEach((t, i) => {
      if (!isRecord(t)) return;
      if (typeof t.name === 'string' && t.name.length > 0) {
        const first = names.get(t.name);
        if (first === undefined) names.set(t.name, i);
        else ctx.addIssue({ code: 'custom', path: [i, 'name'], input: t.name, message: `${RULE.tokenNameUnique} (also tokens[${first}].name)` });
      }
      if (typeof t.sha256 === 'string' && HEX64_RE.test(t.sha256)) {
        const digest = t.sha256.toLowerCase();
        const first = digests.get(digest);
        if (first === undefined) digests.set(digest, i);
        else ctx.addIssue({ code: 'custom', path: [i, 'sha256'], input: t.sha256, message: `${RULE.sha256Unique} (same digest as tokens[${first}])` });
      }
    });
  }, ALWAYS)
  .describe(`${RULE.tokens}; names and digests unique within the service`);

const methods = z
  .array(z.string({ error: RULE.method }).regex(TOKEN_RE, { error: RULE.method }), { error: RULE.methods })
  .superRefine((list, ctx) => {
    if (Array.isArray(list) && !list.some((m) => typeof m === 'string' && m.toUpperCase() === 'POST')) {
      ctx.addIssue({ code: 'custom', message: RULE.methodsPost, input: list });
    }
  }, ALWAYS)
  .transform((list) => [...new Set(list.map((m) => m.toUpperCase()))])
  .describe(`${RULE.methods}; ${RULE.methodsPost}`);

const forwardHeader = z
  .string({ error: RULE.header })
  .regex(TOKEN_RE, { error: RULE.header })
  .superRefine((h, ctx) => {
    const why = NOT_FORWARDABLE.get(h.toLowerCase());
    if (why !== undefined) ctx.addIssue({ code: 'custom', message: `cannot be forwarded: ${why}`, input: h });
  });

const forwardHeaders = z
  .array(forwardHeader, { error: RULE.forwardHeaders })
  .transform((list) => [...new Set(list.map((h) => h.toLowerCase()))].filter((h) => !ALWAYS_FORWARDED.has(h)))
  .describe(`${RULE.forwardHeaders}, forwarded from the caller besides Content-Type and Accept; never credentials, framing or hop-by-hop headers`);

const replicaUrl = z.string({ error: RULE.url }).transform((raw, ctx) => {
  const origin = urlOrigin(raw);
  if (origin === undefined) {
    ctx.addIssue({ code: 'custom', message: RULE.url, input: raw });
    return z.NEVER;
  }
  return origin;
});

/** `http://host:port` or `http://host:port/` → its origin; anything else → undefined. */
function urlOrigin(raw: string): string | undefined {
  if (!/^http:\/\//i.test(raw) || /[\s?#\\]/.test(raw)) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' || url.username !== '' || url.password !== '' || url.pathname !== '/') return undefined;
  if (url.hostname === '' || url.port === '0') return undefined;
  return url.origin;
}

const urls = z
  .array(replicaUrl, { error: RULE.urls })
  .min(1, { error: RULE.urls })
  .superRefine((list, ctx) => {
    const seen = new Map<string, number>();
    if (!Array.isArray(list)) return;
    list.forEach((u, i) => {
      if (typeof u !== 'string') return;
      const first = seen.get(u);
      if (first === undefined) seen.set(u, i);
      else ctx.addIssue({ code: 'custom', path: [i], input: u, message: `${RULE.urlUnique} (same replica as urls[${first}])` });
    });
  }, ALWAYS)
  .describe(`${RULE.urls}, each ${RULE.url.replace('must be ', '')}, unique; either urls or command`);

const commandArg = z.string({ error: RULE.arg }).min(1, { error: RULE.arg }).refine((s) => !s.includes('\0'), { error: RULE.arg });

const env = z
  .record(z.string(), z.string({ error: RULE.envValue }).refine((s) => !s.includes('\0'), { error: RULE.envValue }), {
    error: RULE.env,
  })
  .superRefine((vars, ctx) => {
    if (!isRecord(vars)) return;
    for (const name of Object.keys(vars)) {
      if (!ENV_NAME_RE.test(name)) ctx.addIssue({ code: 'custom', path: [name], input: vars[name], message: RULE.envName });
      else if (name === 'PORT') ctx.addIssue({ code: 'custom', path: [name], input: vars[name], message: RULE.envPort });
    }
  }, ALWAYS)
  .describe(`${RULE.env}; not PORT (set by Sluice)`);

const replicas = strict(
  {
    urls: urls.optional(),
    command: z
      .array(commandArg, { error: RULE.command })
      .min(1, { error: RULE.command })
      .describe(`${RULE.command}; either urls or command`)
      .optional(),
    env: env.prefault({}),
    readyPath: z.string({ error: RULE.readyPath }).regex(READY_PATH_RE, { error: RULE.readyPath }).describe(RULE.readyPath).optional(),
    startTimeoutMs: duration().prefault(DEFAULTS.startTimeoutMs),
    min: int(0, Number.MAX_SAFE_INTEGER, RULE.min).describe(`${RULE.min} and ≤ max`).prefault(DEFAULTS.min),
    max: int(1, Number.MAX_SAFE_INTEGER, RULE.max).prefault(DEFAULTS.max),
    idleTimeoutMs: duration().prefault(DEFAULTS.idleTimeoutMs),
    concurrency: int(0, Number.MAX_SAFE_INTEGER, RULE.concurrency).prefault(DEFAULTS.concurrency),
  },
  RULE.replicas,
).superRefine((r, ctx) => {
  if (!isRecord(r)) return;
  const hasUrls = r.urls !== undefined;
  const hasCommand = r.command !== undefined;
  if (hasUrls && hasCommand) {
    const cmd = r.command;
    const shown = Array.isArray(cmd) && cmd.every((a) => typeof a === 'string') ? cmd : '(invalid list)';
    ctx.addIssue({ code: 'custom', path: ['command'], input: shown, message: RULE.replicasBoth });
  } else if (!hasUrls && !hasCommand) {
    ctx.addIssue({ code: 'custom', path: ['urls'], input: undefined, message: RULE.replicasNeither });
  }
  if (typeof r.min === 'number' && typeof r.max === 'number' && Number.isInteger(r.min) && Number.isInteger(r.max) && r.min > r.max) {
    ctx.addIssue({ code: 'custom', path: ['min'], input: r.min, message: `must not be greater than replicas.max (${r.max})` });
  }
  if (hasUrls && !hasCommand) {
    // Static replicas run elsewhere: Sluice neither starts nor stops them. A launch setting left
    // at its default is harmless; one set to anything else would be silently ignored, so refuse it.
    const launchOnly: [key: string, value: unknown, unchanged: boolean][] = [
      ['env', r.env, isRecord(r.env) && Object.keys(r.env).length === 0],
      ['startTimeoutMs', r.startTimeoutMs, r.startTimeoutMs === DEFAULTS.startTimeoutMs],
      ['min', r.min, r.min === DEFAULTS.min],
      ['max', r.max, r.max === DEFAULTS.max],
      ['idleTimeoutMs', r.idleTimeoutMs, r.idleTimeoutMs === DEFAULTS.idleTimeoutMs],
    ];
    for (const [key, value, unchanged] of launchOnly) {
      if (!unchanged) ctx.addIssue({ code: 'custom', path: [key], input: value, message: RULE.staticOnly });
    }
  }
}, ALWAYS);

const service = strict({
  slug: z.string({ error: RULE.slug }).regex(SLUG_RE, { error: RULE.slug }).describe(`${RULE.slug}; unique`),
  tokens,
  methods: methods.prefault(['POST']),
  forwardHeaders: forwardHeaders.prefault([]),
  maxRequestBytes: int(1, Number.MAX_SAFE_INTEGER, RULE.maxRequestBytes).prefault(DEFAULTS.maxRequestBytes),
  timeouts: strict({
    responseHeadersMs: duration().prefault(DEFAULTS.responseHeadersMs),
    bodyIdleMs: duration().prefault(DEFAULTS.bodyIdleMs),
  }).prefault({}),
  queue: strict({
    maxRequests: int(0, Number.MAX_SAFE_INTEGER, RULE.queueMaxRequests).prefault(DEFAULTS.queueMaxRequests),
    maxWaitMs: duration().prefault(DEFAULTS.queueMaxWaitMs),
  }).prefault({}),
  replicas,
});

const services = z
  .array(service, { error: RULE.services })
  .min(1, { error: RULE.services })
  .superRefine((list, ctx) => {
    const seen = new Map<string, number>();
    if (!Array.isArray(list)) return;
    list.forEach((s, i) => {
      if (!isRecord(s) || typeof s.slug !== 'string' || !SLUG_RE.test(s.slug)) return;
      const first = seen.get(s.slug);
      if (first === undefined) seen.set(s.slug, i);
      else ctx.addIssue({ code: 'custom', path: [i, 'slug'], input: s.slug, message: `${RULE.slugUnique} (also services[${first}].slug)` });
    });
  }, ALWAYS)
  .describe(`${RULE.services}; slugs unique`);

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '']);

export const configSchema = strict(
  {
    listen: listen.prefault({}),
    admin: admin.optional().describe('must be { host, port }; port differs from listen.port on the same host'),
    workers: int(0, 64, RULE.workers).prefault(DEFAULTS.workers),
    basePath: basePath.prefault(DEFAULTS.basePath),
    drainTimeoutMs: duration().prefault(DEFAULTS.drainTimeoutMs),
    log: strict({ level: logLevel.prefault(DEFAULTS.logLevel) }).prefault({}),
    services,
  },
  RULE.root,
).superRefine((c, ctx) => {
  if (!isRecord(c) || !isRecord(c.listen) || !isRecord(c.admin)) return;
  const a = c.admin;
  const l = c.listen;
  if (typeof a.port !== 'number' || a.port === 0 || a.port !== l.port) return;
  const sameHost = a.host === l.host || WILDCARD_HOSTS.has(String(a.host)) || WILDCARD_HOSTS.has(String(l.host));
  if (sameHost) {
    ctx.addIssue({ code: 'custom', path: ['admin', 'port'], input: a.port, message: `must differ from listen.port (${String(l.port)}) on the same host` });
  }
}, ALWAYS);

// Compile-time proof that the schema's output is the Config the rest of Sluice uses.
type SchemaOutput = z.output<typeof configSchema>;
const _assignable: (c: SchemaOutput) => Config = (c) => c;
void _assignable;
