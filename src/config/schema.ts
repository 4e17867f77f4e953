// The config schema: every key, its default and its rule. The schema fills
// every default, normalizes values (lower-case digests and header names, upper-case methods, URL
// origins, no trailing `/` on basePath) and rejects unknown keys. Each key carries its rule in
// words (`.describe`), which is also what `config/doc.ts` prints for the table in docs/configuration.md.
import { TOKEN } from '../http/syntax.js';
import { isIPv6 } from 'node:net';
import { z } from 'zod';
import type { Config } from './types.js';
import { replicas } from './replicas-schema.js';
import { routing } from './routing-schema.js';
import { limits, limitStore } from './limits-schema.js';
import { tracingSchema } from './tracing-config.js';
import { checkPools, pools } from './pools-schema.js';
import { checkRouters, models, routerList, tokenModels } from './routers-schema.js';
import {
  ALWAYS,
  ALWAYS_FORWARDED,
  BASE_PATH_RE,
  DEFAULTS,
  duration,
  HEX64_RE,
  int,
  isRecord,
  LOG_LEVELS,
  MAX_DURATION_MS,
  MAX_SESSION_MESSAGE_BYTES,
  MIN_KEEP_ALIVE_MS,
  MAX_PRIORITY,
  MIN_PRIORITY,
  nonEmptyString,
  NOT_FORWARDABLE,
  RULE,
  SLUG_RE,
  strict,
  } from './rules.js';
import { checkTlsFiles } from './tls.js';

export { DEFAULTS, isRecord, RULE } from './rules.js';

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

const digest = z.string({ error: RULE.sha256 }).transform((s, ctx) => {
  if (HEX64_RE.test(s)) return s.toLowerCase();
  // A token pasted where its digest belongs must not be echoed into error output or logs.
  if (s.startsWith('slc_')) ctx.addIssue({ code: 'custom', message: RULE.sha256NotToken, input: '[redacted]' });
  else ctx.addIssue({ code: 'custom', message: RULE.sha256, input: s });
  return z.NEVER;
}).describe(RULE.sha256);

const admin = strict({
  host: host.prefault(DEFAULTS.host),
  port,
  tokens: z
    .array(strict({ name: nonEmptyString(RULE.tokenName), sha256: digest }), { error: RULE.adminTokens })
    .min(1, { error: RULE.adminTokens })
    .optional()
    .describe(RULE.adminTokens),
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

const tokenShape = {
  name: nonEmptyString(RULE.tokenName),
  sha256: digest,
  priority: int(MIN_PRIORITY, MAX_PRIORITY, RULE.priority).prefault(DEFAULTS.priority),
  limits,
};

/** A list of tokens (`services[].tokens`, `routers[].tokens`): names and digests unique within it. */
const tokenList = <T extends z.ZodType>(token: T, min: number, rule: string) => z
  .array(token, { error: rule })
  .min(min, { error: rule })
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
  .describe(`${rule}; names and digests unique within the list`);

// A service's may be empty (or not set): it has no tokens of its own (checkRouters).
const tokens = tokenList(strict(tokenShape), 0, RULE.tokens);
/** A router's tokens may be scoped to some of its models (checkRouters checks that it serves them). */
const routerTokens = tokenList(strict({ ...tokenShape, models: tokenModels }), 1, RULE.routerTokens);

const methods = z
  .array(z.string({ error: RULE.method }).regex(TOKEN, { error: RULE.method }), { error: RULE.methods })
  .superRefine((list, ctx) => {
    if (Array.isArray(list) && !list.some((m) => typeof m === 'string' && m.toUpperCase() === 'POST')) {
      ctx.addIssue({ code: 'custom', message: RULE.methodsPost, input: list });
    }
  }, ALWAYS)
  .transform((list) => [...new Set(list.map((m) => m.toUpperCase()))])
  .describe(`${RULE.methods}; ${RULE.methodsPost}`);

const forwardHeader = z
  .string({ error: RULE.header })
  .regex(TOKEN, { error: RULE.header })
  .superRefine((h, ctx) => {
    const why = NOT_FORWARDABLE.get(h.toLowerCase());
    if (why !== undefined) ctx.addIssue({ code: 'custom', message: `cannot be forwarded: ${why}`, input: h });
  });

const forwardHeaders = z
  .array(forwardHeader, { error: RULE.forwardHeaders })
  .transform((list) => [...new Set(list.map((h) => h.toLowerCase()))].filter((h) => !ALWAYS_FORWARDED.has(h)))
  .describe(`${RULE.forwardHeaders}, forwarded from the caller besides Content-Type and Accept; never credentials, framing or hop-by-hop headers`);

const keepAliveMs = int(0, MAX_DURATION_MS, RULE.keepAliveMs).refine((ms) => ms === 0 || ms >= MIN_KEEP_ALIVE_MS, { error: RULE.keepAliveMs });

const service = strict({
  slug: z.string({ error: RULE.slug }).regex(SLUG_RE, { error: RULE.slug }).describe(`${RULE.slug}; unique`),
  // Not set: the service has no tokens of its own and is reachable only through a router (checkRouters).
  tokens: tokens.optional().transform((list) => list ?? []),
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
    keepAliveMs: keepAliveMs.prefault(DEFAULTS.queueKeepAliveMs),
  }).prefault({}),
  uploads: strict({
    bufferBytes: int(0, Number.MAX_SAFE_INTEGER, RULE.uploadsBufferBytes).prefault(DEFAULTS.uploadsBufferBytes),
  }).prefault({}),
  sessions: strict({
    maxMessageBytes: int(1, MAX_SESSION_MESSAGE_BYTES, RULE.sessionMaxMessageBytes).prefault(DEFAULTS.sessionMaxMessageBytes),
    maxMs: duration().prefault(DEFAULTS.sessionMaxMs),
  }).prefault({}),
  routing: routing.prefault({}),
  replicas,
  limits,
  models,
}).superRefine((s, ctx) => {
  // Launched and Kubernetes replicas start on a queued request: a service that can neither queue
  // nor keep a replica warm would refuse every request, forever.
  if (!isRecord(s) || !isRecord(s.queue) || !isRecord(s.replicas)) return;
  const onDemand = s.replicas.command !== undefined || s.replicas.kubernetes !== undefined;
  if (onDemand && s.queue.maxRequests === 0 && s.replicas.min === 0) {
    ctx.addIssue({ code: 'custom', path: ['queue', 'maxRequests'], input: 0, message: RULE.queueNeededCold });
  }
}, ALWAYS);

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
    admin: admin.optional().describe('must be { host, port } with optional tokens; port differs from listen.port on the same host'),
    workers: int(0, 64, RULE.workers).prefault(DEFAULTS.workers),
    basePath: basePath.prefault(DEFAULTS.basePath),
    drainTimeoutMs: duration().prefault(DEFAULTS.drainTimeoutMs),
    log: strict({ level: logLevel.prefault(DEFAULTS.logLevel) }).prefault({}),
    limits: limitStore.prefault({}),
    pools: pools.prefault([]),
    services,
    routers: routerList(routerTokens).optional(),
    tracing: tracingSchema,
  },
  RULE.root,
).superRefine((c, ctx) => {
  if (isRecord(c)) checkPools(c, ctx);
  if (isRecord(c)) checkRouters(c, ctx);
  if (!isRecord(c) || !isRecord(c.listen) || !isRecord(c.admin)) return;
  const a = c.admin;
  const l = c.listen;
  if (typeof a.port !== 'number' || a.port === 0 || a.port !== l.port) return;
  const sameHost = a.host === l.host || WILDCARD_HOSTS.has(String(a.host)) || WILDCARD_HOSTS.has(String(l.host));
  if (sameHost) {
    ctx.addIssue({ code: 'custom', path: ['admin', 'port'], input: a.port, message: `must differ from listen.port (${String(l.port)}) on the same host` });
  }
}, ALWAYS);

// Compile-time proof that the schema's output is the Config the rest of Sluice uses (but `tracing`,
// which load.ts merges with the environment: tracing-config.ts).
type SchemaOutput = Omit<z.output<typeof configSchema>, 'tracing'>;
const _assignable: (c: SchemaOutput) => Omit<Config, 'tracing'> = (c) => c;
void _assignable;
