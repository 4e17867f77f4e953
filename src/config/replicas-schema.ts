// The `replicas` section of a service: exactly one kind of
// replicas (static `urls`, launched `command`, or `kubernetes`) and the settings that apply to it.
import { z } from 'zod';
import { load } from './routing-schema.js';
import { replicaPool, replicaUnits } from './pools-schema.js';
import {
  ALWAYS,
  DEFAULTS,
  DNS_1035_LABEL_RE,
  DNS_LABEL_RE,
  DNS_SUBDOMAIN_RE,
  duration,
  ENV_NAME_RE,
  int,
  isRecord,
  MAX_DURATION_MS,
  nonEmptyString,
  READY_PATH_RE,
  RULE,
  strict,
} from './rules.js';

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
  .describe(`${RULE.urls}, each ${RULE.url.replace('must be ', '')}, unique; either urls, command or kubernetes`);

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

const kubernetes = strict(
  {
    namespace: z.string({ error: RULE.kubeNamespace }).regex(DNS_LABEL_RE, { error: RULE.kubeNamespace }).describe(RULE.kubeNamespace).optional(),
    deployment: z
      .string({ error: RULE.kubeDeployment })
      .max(253, { error: RULE.kubeDeployment })
      .regex(DNS_SUBDOMAIN_RE, { error: RULE.kubeDeployment })
      .describe(RULE.kubeDeployment),
    service: z.string({ error: RULE.kubeService }).regex(DNS_1035_LABEL_RE, { error: RULE.kubeService }).describe(RULE.kubeService),
    port: z
      .union([int(1, 65_535, RULE.kubePort), z.string().regex(DNS_LABEL_RE, { error: RULE.kubePort }).regex(/[a-z]/, { error: RULE.kubePort })], { error: RULE.kubePort })
      .describe(RULE.kubePort),
    kubeconfig: nonEmptyString(RULE.kubeconfig).optional(),
  },
  RULE.kubernetes,
).describe(`${RULE.kubernetes}; either urls, command or kubernetes`);

export const replicas = strict(
  {
    urls: urls.optional(),
    command: z
      .array(commandArg, { error: RULE.command })
      .min(1, { error: RULE.command })
      .describe(`${RULE.command}; either urls, command or kubernetes`)
      .optional(),
    kubernetes: kubernetes.optional(),
    env: env.prefault({}),
    readyPath: z.string({ error: RULE.readyPath }).regex(READY_PATH_RE, { error: RULE.readyPath }).describe(RULE.readyPath).optional(),
    startTimeoutMs: duration().prefault(DEFAULTS.startTimeoutMs),
    min: int(0, Number.MAX_SAFE_INTEGER, RULE.min).describe(`${RULE.min} and ≤ max`).prefault(DEFAULTS.min),
    max: int(1, Number.MAX_SAFE_INTEGER, RULE.max).prefault(DEFAULTS.max),
    idleTimeoutMs: duration().prefault(DEFAULTS.idleTimeoutMs),
    keepAliveMaxMs: int(0, MAX_DURATION_MS, RULE.keepAliveMaxMs).prefault(DEFAULTS.keepAliveMaxMs),
    concurrency: int(0, Number.MAX_SAFE_INTEGER, RULE.concurrency).prefault(DEFAULTS.concurrency),
    load: load.optional(),
    pool: replicaPool,
    units: replicaUnits,
  },
  RULE.replicas,
).superRefine((r, ctx) => {
  if (!isRecord(r)) return;
  const kinds = (['urls', 'command', 'kubernetes'] as const).filter((k) => r[k] !== undefined);
  if (kinds.length === 0) {
    ctx.addIssue({ code: 'custom', path: ['urls'], input: undefined, message: RULE.replicasNeither });
  }
  for (const extra of kinds.slice(1)) {
    ctx.addIssue({ code: 'custom', path: [extra], input: shown(r[extra]), message: RULE.replicasBoth.replace('$OTHER', kinds[0]!) });
  }
  if (typeof r.min === 'number' && typeof r.max === 'number' && Number.isInteger(r.min) && Number.isInteger(r.max) && r.min > r.max) {
    ctx.addIssue({ code: 'custom', path: ['min'], input: r.min, message: `must not be greater than replicas.max (${r.max})` });
  }
  // A setting left at its default is harmless; one set to anything else would be silently
  // ignored for this kind of replicas, so refuse it.
  const envUnchanged = isRecord(r.env) && Object.keys(r.env).length === 0;
  const startUnchanged = r.startTimeoutMs === DEFAULTS.startTimeoutMs;
  if (kinds.length === 1 && kinds[0] === 'urls') {
    // Static replicas run elsewhere: Sluice neither starts nor stops them.
    const launchOnly: [key: string, value: unknown, unchanged: boolean][] = [
      ['env', r.env, envUnchanged],
      ['startTimeoutMs', r.startTimeoutMs, startUnchanged],
      ['min', r.min, r.min === DEFAULTS.min],
      ['max', r.max, r.max === DEFAULTS.max],
      ['idleTimeoutMs', r.idleTimeoutMs, r.idleTimeoutMs === DEFAULTS.idleTimeoutMs],
    ];
    for (const [key, value, unchanged] of launchOnly) {
      if (!unchanged) ctx.addIssue({ code: 'custom', path: [key], input: value, message: RULE.staticOnly });
    }
  }
  if (kinds.length === 1 && kinds[0] !== 'command' && r.keepAliveMaxMs !== DEFAULTS.keepAliveMaxMs) {
    ctx.addIssue({ code: 'custom', path: ['keepAliveMaxMs'], input: r.keepAliveMaxMs, message: RULE.launchedOnly });
  }
  if (kinds.length === 1 && kinds[0] === 'kubernetes') {
    // Kubernetes starts the pods from the Deployment's template: its environment and its start.
    if (!envUnchanged) ctx.addIssue({ code: 'custom', path: ['env'], input: r.env, message: RULE.kubeLaunchOnly });
    if (!startUnchanged) ctx.addIssue({ code: 'custom', path: ['startTimeoutMs'], input: r.startTimeoutMs, message: RULE.kubeLaunchOnly });
  }
}, ALWAYS);

/** A value as a problem shows it: a command list as is, anything else by its type. */
function shown(value: unknown): unknown {
  if (Array.isArray(value)) return value.every((a) => typeof a === 'string') ? value : '(invalid list)';
  return isRecord(value) ? '{…}' : value;
}
