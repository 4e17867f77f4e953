// Loads and validates the configuration once, at start (contract section 7).
// The schema fills every default, normalizes values (lower-case digests and header names,
// upper-case methods, URL origins, no trailing `/` on basePath) and rejects unknown keys.
// Every problem is reported at once, each as key, value and rule, never only the first.
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import type { Config } from './config-types.js';

export type { Config };

/** One thing wrong with a config: where (`services[0].slug`), what was there, and the rule it breaks. */
export interface ConfigProblem {
  key: string;
  value: unknown;
  rule: string;
}

/** A config that cannot be used. `message` lists every problem, one per line. */
export class ConfigError extends Error {
  readonly problems: ConfigProblem[];
  /** One line saying why the config is unusable ("3 problems", "YAML syntax error at line 2, column 7"). */
  readonly summary: string;

  constructor(problems: ConfigProblem[], summary?: string) {
    super(problems.map(formatProblem).join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
    this.summary = summary ?? `${problems.length} ${problems.length === 1 ? 'problem' : 'problems'}`;
  }
}

/** `services[0].timeouts.responseHeadersMs: -5 — must be an integer ≥ 1 …` */
export function formatProblem(p: ConfigProblem): string {
  return `${p.key}: ${formatValue(p.value)} — ${p.rule}`;
}

function formatValue(value: unknown): string {
  if (value === undefined) return '(missing)';
  let text: string;
  try {
    text = typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

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
const DEFAULTS = {
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

const RULE = {
  root: 'must be an object with a services list',
  object: 'must be an object',
  host: 'must be a host name or IP address (no scheme, port or path)',
  port: 'must be an integer from 0 to 65535 (0 = any free port)',
  file: 'must be a non-empty file path',
  workers: 'must be an integer from 0 to 64 (0 = one per CPU)',
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
  return z.number({ error: rule }).int({ error: rule }).min(min, { error: rule }).max(max, { error: rule });
}

const duration = () => int(1, MAX_DURATION_MS, RULE.duration);

function nonEmptyString(rule: string) {
  return z.string({ error: rule }).min(1, { error: rule });
}

function strict<S extends z.ZodRawShape>(shape: S, rule: string = RULE.object) {
  return z.strictObject(shape, { error: rule });
}

/** Runs a cross-field check even when some fields failed, so every problem is listed at once. */
const ALWAYS = { when: () => true };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const host = z.string({ error: RULE.host }).refine(
  (h) => h.length > 0 && !/[\s/?#@[\]]/.test(h) && (!h.includes(':') || isIPv6(h)),
  { error: RULE.host },
);

const port = int(0, 65_535, RULE.port);

const listen = strict({
  host: host.prefault(DEFAULTS.host),
  port: port.prefault(DEFAULTS.port),
  tls: strict({ certFile: nonEmptyString(RULE.file), keyFile: nonEmptyString(RULE.file) }).optional(),
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
  });

const logLevel = z
  .string({ error: RULE.logLevel })
  .transform((s) => s.toLowerCase())
  .pipe(z.enum(LOG_LEVELS, { error: RULE.logLevel }));

const token = strict({
  name: nonEmptyString(RULE.tokenName),
  sha256: z.string({ error: RULE.sha256 }).transform((s, ctx) => {
    if (HEX64_RE.test(s)) return s.toLowerCase();
    // A token pasted where its digest belongs must not be echoed into error output or logs.
    if (s.startsWith('slc_')) ctx.addIssue({ code: 'custom', message: RULE.sha256NotToken, input: '[redacted]' });
    else ctx.addIssue({ code: 'custom', message: RULE.sha256, input: s });
    return z.NEVER;
  }),
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
  }, ALWAYS);

const methods = z
  .array(z.string({ error: RULE.method }).regex(TOKEN_RE, { error: RULE.method }), { error: RULE.methods })
  .superRefine((list, ctx) => {
    if (Array.isArray(list) && !list.some((m) => typeof m === 'string' && m.toUpperCase() === 'POST')) {
      ctx.addIssue({ code: 'custom', message: RULE.methodsPost, input: list });
    }
  }, ALWAYS)
  .transform((list) => [...new Set(list.map((m) => m.toUpperCase()))]);

const forwardHeader = z
  .string({ error: RULE.header })
  .regex(TOKEN_RE, { error: RULE.header })
  .superRefine((h, ctx) => {
    const why = NOT_FORWARDABLE.get(h.toLowerCase());
    if (why !== undefined) ctx.addIssue({ code: 'custom', message: `cannot be forwarded: ${why}`, input: h });
  });

const forwardHeaders = z
  .array(forwardHeader, { error: RULE.forwardHeaders })
  .transform((list) => [...new Set(list.map((h) => h.toLowerCase()))].filter((h) => !ALWAYS_FORWARDED.has(h)));

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
  }, ALWAYS);

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
  }, ALWAYS);

const replicas = strict(
  {
    urls: urls.optional(),
    command: z.array(commandArg, { error: RULE.command }).min(1, { error: RULE.command }).optional(),
    env: env.prefault({}),
    readyPath: z.string({ error: RULE.readyPath }).regex(READY_PATH_RE, { error: RULE.readyPath }).optional(),
    startTimeoutMs: duration().prefault(DEFAULTS.startTimeoutMs),
    min: int(0, Number.MAX_SAFE_INTEGER, RULE.min).prefault(DEFAULTS.min),
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
  slug: z.string({ error: RULE.slug }).regex(SLUG_RE, { error: RULE.slug }),
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
  }, ALWAYS);

const WILDCARD_HOSTS = new Set(['0.0.0.0', '::', '']);

const configSchema = strict(
  {
    listen: listen.prefault({}),
    admin: admin.optional(),
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

// ---------------------------------------------------------------------------------------------
// Entry points

/** Validates an already-parsed config (an object from JSON or YAML) and fills in every default. */
export function parseConfig(raw: unknown): Config {
  return validate(raw, new Map());
}

/** Environment variables that override config keys, applied before validation. */
const ENV_OVERRIDES = [
  { name: 'SLUICE_HOST', section: 'listen', key: 'host', number: false },
  { name: 'SLUICE_PORT', section: 'listen', key: 'port', number: true },
  { name: 'LOG_LEVEL', section: 'log', key: 'level', number: false },
] as const;

/**
 * Reads a JSON or YAML config file (YAML is a superset of JSON, so one parser reads both),
 * applies the SLUICE_HOST, SLUICE_PORT and LOG_LEVEL overrides and validates the result.
 * Throws ConfigError listing every problem, including a syntax error's line and column.
 */
export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const reason = describeFsError(err);
    throw new ConfigError([{ key: 'file', value: path, rule: `cannot be read (${reason})` }], `cannot read the file (${reason})`);
  }
  const raw = parseText(text);
  const overridden = new Map<string, string>();
  return validate(applyEnv(raw, env, overridden), overridden);
}

function describeFsError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return 'ENOENT: no such file';
    if (code === 'EACCES') return 'EACCES: permission denied';
    if (code === 'EISDIR') return 'EISDIR: is a directory';
    return err.message;
  }
  return String(err);
}

function parseText(text: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const lines = text.split(/\r?\n/);
    const problems = doc.errors.map((e) => {
      const pos = e.linePos?.[0];
      const firstLine = e.message.split('\n')[0] ?? e.message;
      const rule = `YAML/JSON syntax error: ${firstLine.replace(/ at line \d+, column \d+:?$/, '')}`;
      if (pos === undefined) return { key: '(document)', value: undefined, rule };
      const source = (lines[pos.line - 1] ?? '').trim();
      return { key: `line ${pos.line}, column ${pos.col}`, value: source, rule };
    });
    const first = problems[0];
    throw new ConfigError(problems, `syntax error at ${first?.key ?? 'unknown position'}`);
  }
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new ConfigError([{ key: '(document)', value: undefined, rule: `cannot be read as data: ${message}` }], 'unreadable document');
  }
}

function applyEnv(raw: unknown, env: NodeJS.ProcessEnv, overridden: Map<string, string>): unknown {
  // Only a missing or object root can take overrides; anything else is reported by the schema.
  if (raw !== undefined && raw !== null && !isRecord(raw)) return raw;
  const root: Record<string, unknown> = { ...(raw ?? {}) };
  for (const o of ENV_OVERRIDES) {
    const text = env[o.name];
    if (text === undefined || text === '') continue; // empty = unset, as shells usually mean it
    const section = root[o.section];
    if (section !== undefined && !isRecord(section)) continue;
    const value = o.number && /^\d+$/.test(text) ? Number(text) : text;
    root[o.section] = { ...(section ?? {}), [o.key]: value };
    overridden.set(`${o.section}.${o.key}`, o.name);
  }
  return root;
}

function validate(raw: unknown, overridden: Map<string, string>): Config {
  // An empty document is YAML null; report it as a missing root rather than a type error.
  const result = configSchema.safeParse(raw === null ? undefined : raw, { reportInput: true });
  if (result.success) return result.data;
  throw new ConfigError(toProblems(result.error.issues, overridden));
}

function toProblems(issues: readonly z.core.$ZodIssue[], overridden: Map<string, string>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const seen = new Set<string>();
  const add = (p: ConfigProblem): void => {
    const id = `${p.key}\u0000${p.rule}`;
    if (seen.has(id)) return; // an integer check and a range check may both fail with the same rule
    seen.add(id);
    problems.push(p);
  };
  for (const issue of issues) {
    const path = issue.path;
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) {
        const hint = suggest(k, keysAt(path));
        add({
          key: formatKey([...path, k]),
          value: isRecord(issue.input) ? issue.input[k] : undefined,
          rule: hint === undefined ? RULE.unknownKey : `${RULE.unknownKey} (did you mean ${hint}?)`,
        });
      }
      continue;
    }
    const key = formatKey(path);
    let rule = issue.message;
    if (issue.code === 'invalid_type' && issue.input === undefined) rule = `is required; ${rule}`;
    const env = overridden.get(key);
    if (env !== undefined) rule = `${rule} (value from environment variable ${env})`;
    add({ key, value: issue.input, rule });
  }
  return problems;
}

/** `['services', 0, 'timeouts', 'responseHeadersMs']` → `services[0].timeouts.responseHeadersMs`. */
export function formatKey(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else {
      const s = String(part);
      if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(s)) out += out === '' ? s : `.${s}`;
      else out += `[${JSON.stringify(s)}]`;
    }
  }
  return out === '' ? '(config)' : out;
}

/** The keys the schema allows in the object at `path` (walked through the schema's definition). */
function keysAt(path: readonly PropertyKey[]): string[] {
  interface Def {
    type: string;
    shape?: Record<string, { _zod: { def: Def } }>;
    element?: { _zod: { def: Def } };
    valueType?: { _zod: { def: Def } };
    innerType?: { _zod: { def: Def } };
    in?: { _zod: { def: Def } };
  }
  const unwrap = (d: Def | undefined): Def | undefined => {
    while (d !== undefined) {
      const next = d.innerType ?? (d.type === 'pipe' ? d.in : undefined);
      if (next === undefined) return d;
      d = next._zod.def;
    }
    return d;
  };
  let def = unwrap((configSchema as unknown as { _zod: { def: Def } })._zod.def);
  for (const part of path) {
    if (def === undefined) return [];
    if (def.type === 'object') def = def.shape?.[String(part)]?._zod.def;
    else if (def.type === 'array') def = def.element?._zod.def;
    else if (def.type === 'record') def = def.valueType?._zod.def;
    else return [];
    def = unwrap(def);
  }
  return def?.type === 'object' && def.shape !== undefined ? Object.keys(def.shape) : [];
}

/** The allowed key closest to an unknown one, if it is close enough to be a typo. */
function suggest(unknown: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const lower = unknown.toLowerCase();
  for (const known of allowed) {
    const d = known.toLowerCase() === lower ? 0.5 : editDistance(lower, known.toLowerCase());
    if (d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(1, Math.floor(unknown.length / 4)) ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    for (let j = 1; j <= b.length; j++) {
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(a.length, b.length);
}
