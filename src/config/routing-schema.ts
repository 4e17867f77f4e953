// How a service's requests choose a replica: `routing` (session affinity, prefix-aware routing) and `replicas.load` (the
// model servers' own load, read from their Prometheus endpoints). The load section comes out with
// the preset's metric names filled in (load-presets.ts), so the rest of Sluice sees lists of names
// and never a preset.
import { TOKEN } from '../http/syntax.js';
import { z } from 'zod';
import type { LoadConfig, PrefixConfig } from './types.js';
import { LOAD_PRESET_NAMES, LOAD_PRESETS } from './load-presets.js';
import { ALWAYS, DEFAULTS, int, isRecord, METRIC_NAME_RE, READ_BY_SLUICE, READY_PATH_RE, RULE, strict } from './rules.js';

// `routing.prefix`: true (the defaults), false (off), or an object of tunables.
const prefixTunables = strict(
  {
    blockBytes: int(16, 65_536, RULE.prefixBlockBytes).prefault(DEFAULTS.prefixBlockBytes),
    maxBlocks: int(1, 1024, RULE.prefixMaxBlocks).prefault(DEFAULTS.prefixMaxBlocks),
    indexSize: int(256, 1_048_576, RULE.prefixIndexSize).prefault(DEFAULTS.prefixIndexSize),
  },
  RULE.prefix,
);

const prefix = z
  .union([z.boolean(), prefixTunables], { error: RULE.prefix })
  .transform((p): PrefixConfig | undefined => (p === false ? undefined : p === true ? { blockBytes: DEFAULTS.prefixBlockBytes, maxBlocks: DEFAULTS.prefixMaxBlocks, indexSize: DEFAULTS.prefixIndexSize } : p))
  .describe(RULE.prefix);

export const routing = strict(
  {
    affinityHeader: z
      .string({ error: RULE.affinityHeader })
      .regex(TOKEN, { error: RULE.affinityHeader })
      .transform((h) => h.toLowerCase())
      .refine((h) => !READ_BY_SLUICE.has(h), { error: RULE.affinityHeaderRead })
      .describe(`${RULE.affinityHeader}, not one Sluice reads itself (Authorization, Content-Type, X-Sluice-…)`)
      .optional(),
    affinityMaxLoad: z
      .number({ error: RULE.affinityMaxLoad })
      .min(1, { error: RULE.affinityMaxLoad })
      .max(100, { error: RULE.affinityMaxLoad })
      .describe(RULE.affinityMaxLoad)
      .prefault(DEFAULTS.affinityMaxLoad),
    prefix: prefix.optional(),
  },
  RULE.routing,
).superRefine((r, ctx) => {
  if (!isRecord(r)) return;
  // A bound for an affinity nobody asked for would be silently ignored.
  if (r.affinityHeader === undefined && r.prefix === undefined && r.affinityMaxLoad !== DEFAULTS.affinityMaxLoad) {
    ctx.addIssue({ code: 'custom', path: ['affinityMaxLoad'], input: r.affinityMaxLoad, message: RULE.affinityMaxLoadAlone });
  }
}, ALWAYS);

const metricName = z.string({ error: RULE.metricName }).regex(METRIC_NAME_RE, { error: RULE.metricName }).describe(RULE.metricName);

export const load = strict(
  {
    preset: z.enum(LOAD_PRESET_NAMES, { error: RULE.loadPreset }).describe(RULE.loadPreset).optional(),
    path: z.string({ error: RULE.loadPath }).regex(READY_PATH_RE, { error: RULE.loadPath }).describe(RULE.loadPath).prefault(DEFAULTS.loadPath),
    intervalMs: int(50, 60_000, RULE.loadIntervalMs).prefault(DEFAULTS.loadIntervalMs),
    waiting: metricName.optional(),
    cacheUsage: metricName.optional(),
    cacheUsageHigh: z
      .number({ error: RULE.cacheUsageHigh })
      .gt(0, { error: RULE.cacheUsageHigh })
      .max(1, { error: RULE.cacheUsageHigh })
      .describe(RULE.cacheUsageHigh)
      .prefault(DEFAULTS.cacheUsageHigh),
  },
  RULE.load,
)
  .superRefine((l, ctx) => {
    if (!isRecord(l)) return;
    const preset = typeof l.preset === 'string' && l.preset in LOAD_PRESETS ? LOAD_PRESETS[l.preset as keyof typeof LOAD_PRESETS] : undefined;
    if (l.waiting === undefined && l.preset === undefined) {
      ctx.addIssue({ code: 'custom', path: ['waiting'], input: undefined, message: RULE.loadWaitingNeeded });
    }
    const hasCache = l.cacheUsage !== undefined || (preset !== undefined && preset.cacheUsage.length > 0) || (l.preset !== undefined && preset === undefined);
    if (!hasCache && l.cacheUsageHigh !== DEFAULTS.cacheUsageHigh) {
      ctx.addIssue({ code: 'custom', path: ['cacheUsageHigh'], input: l.cacheUsageHigh, message: RULE.cacheUsageHighAlone });
    }
  }, ALWAYS)
  .transform((l): LoadConfig => {
    // Explicit names override the preset's.
    const preset = l.preset === undefined ? undefined : LOAD_PRESETS[l.preset];
    return {
      ...(l.preset === undefined ? {} : { preset: l.preset }),
      path: l.path,
      intervalMs: l.intervalMs,
      waiting: l.waiting !== undefined ? [l.waiting] : [...(preset?.waiting ?? [])],
      cacheUsage: l.cacheUsage !== undefined ? [l.cacheUsage] : [...(preset?.cacheUsage ?? [])],
      running: [...(preset?.running ?? [])],
      cacheUsageHigh: l.cacheUsageHigh,
    };
  })
  .describe('must be { preset } (vllm, sglang, tgi, llamacpp) or { waiting }, with optional path, intervalMs, cacheUsage and cacheUsageHigh');
