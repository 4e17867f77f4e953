// The schema of pools (docs/configuration.md#pools): top-level `pools: [{ name, size }]`, sets of
// units (GPUs) that launched replicas take from, and `replicas.pool` / `replicas.units` of a
// service. The checks that cross sections (a pool a service names exists, its units fit the pool,
// `{units}` only where units are given) run once over the whole config (`checkPools`).
import { z } from 'zod';
import { ALWAYS, DEFAULTS, int, isRecord, RULE, SLUG_RE, strict } from './rules.js';

/** `{units}` in a launched replica's command or env: the indices of the units it holds. */
const UNITS_PLACEHOLDER = '{units}';

const pool = strict(
  {
    name: z.string({ error: RULE.poolName }).regex(SLUG_RE, { error: RULE.poolName }).describe(`${RULE.poolName}; unique`),
    size: int(1, 1024, RULE.poolSize),
  },
  RULE.pool,
);

/** Top-level `pools`. */
export const pools = z
  .array(pool, { error: RULE.pools })
  .superRefine((list, ctx) => {
    const seen = new Map<string, number>();
    if (!Array.isArray(list)) return;
    list.forEach((p, i) => {
      if (!isRecord(p) || typeof p.name !== 'string') return;
      const first = seen.get(p.name);
      if (first === undefined) seen.set(p.name, i);
      else ctx.addIssue({ code: 'custom', path: [i, 'name'], input: p.name, message: `${RULE.poolNameUnique} (also pools[${first}].name)` });
    });
  }, ALWAYS)
  .describe(`${RULE.pools}; names unique`);

/** `replicas.pool`. */
export const replicaPool = z.string({ error: RULE.replicaPool }).min(1, { error: RULE.replicaPool }).describe(RULE.replicaPool).optional();

/** `replicas.units`. */
export const replicaUnits = int(1, 1024, RULE.replicaUnits).describe(`${RULE.replicaUnits}; ≤ the pool's size`).prefault(DEFAULTS.units);

type Ctx = z.core.$RefinementCtx<unknown>;

/** Every check of pools that crosses sections, on the whole config (its shape may still be wrong). */
export function checkPools(config: Record<string, unknown>, ctx: Ctx): void {
  const sizes = new Map<string, number>();
  if (Array.isArray(config.pools)) for (const p of config.pools) if (isRecord(p) && typeof p.name === 'string') sizes.set(p.name, typeof p.size === 'number' ? p.size : NaN);
  /** Units kept by `min` on each pool (replicas `min` keeps are never stopped for another service). */
  const pinned = new Map<string, { units: number; by: string[] }>();
  if (!Array.isArray(config.services)) return;
  config.services.forEach((s, i) => {
    if (!isRecord(s) || !isRecord(s.replicas)) return;
    const r = s.replicas;
    const at = (key: string): PropertyKey[] => ['services', i, 'replicas', key];
    const units = typeof r.units === 'number' ? r.units : DEFAULTS.units;
    if (r.pool === undefined) {
      if (units !== DEFAULTS.units) ctx.addIssue({ code: 'custom', path: at('units'), input: r.units, message: RULE.unitsWithoutPool });
      const mentions = [...(Array.isArray(r.command) ? r.command : []), ...(isRecord(r.env) ? Object.values(r.env) : [])].some((v) => typeof v === 'string' && v.includes(UNITS_PLACEHOLDER));
      if (mentions) ctx.addIssue({ code: 'custom', path: at(Array.isArray(r.command) && r.command.some((v) => typeof v === 'string' && v.includes(UNITS_PLACEHOLDER)) ? 'command' : 'env'), input: UNITS_PLACEHOLDER, message: RULE.unitsPlaceholderWithoutPool });
      return;
    }
    if (typeof r.pool !== 'string') return;
    if (r.command === undefined) {
      ctx.addIssue({ code: 'custom', path: at('pool'), input: r.pool, message: RULE.poolLaunchedOnly });
      return;
    }
    const size = sizes.get(r.pool);
    if (size === undefined) {
      const known = [...sizes.keys()];
      ctx.addIssue({ code: 'custom', path: at('pool'), input: r.pool, message: `${RULE.poolUnknown} (${known.length === 0 ? 'there is no pools list' : `pools: ${known.join(', ')}`})` });
      return;
    }
    if (Number.isInteger(size) && units > size) {
      ctx.addIssue({ code: 'custom', path: at('units'), input: units, message: `must be at most the size of pool ${r.pool} (${size})` });
      return;
    }
    const min = typeof r.min === 'number' ? r.min : DEFAULTS.min;
    if (min > 0 && typeof s.slug === 'string') {
      const kept = pinned.get(r.pool) ?? { units: 0, by: [] };
      kept.units += min * units;
      kept.by.push(s.slug);
      pinned.set(r.pool, kept);
      if (Number.isInteger(size) && kept.units > size) {
        ctx.addIssue({ code: 'custom', path: at('min'), input: min, message: `must leave room in pool ${r.pool}: replicas.min × replicas.units of ${kept.by.join(', ')} add up to ${kept.units}, more than its size (${size}); a replica that min keeps is never stopped for another service` });
      }
    }
  });
}
