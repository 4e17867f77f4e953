// What a config puts behind its routers and on its pools, in a few words: for the `gateway
// listening` log line and `sluice check` (docs/operations.md), so an operator sees at the start
// which model goes to which service and which services share which units.
import type { Config, RouterConfig } from './types.js';

export interface RouterSummary {
  slug: string;
  /** Each model the router routes, by the service serving it, in config order. */
  models: Record<string, string>;
}

export interface PoolSummary {
  name: string;
  size: number;
  /** Each launched service taking units from it, with the units one replica holds. */
  services: Record<string, number>;
}

export function routerSummaries(config: { routers?: readonly RouterConfig[] | undefined; services: readonly { slug: string; models?: string[] | undefined }[] }): RouterSummary[] {
  return (config.routers ?? []).map((router) => {
    const named = router.services === undefined ? undefined : new Set(router.services);
    const models: Record<string, string> = {};
    for (const s of config.services) {
      if (named !== undefined && !named.has(s.slug)) continue;
      for (const model of s.models ?? []) models[model] = s.slug;
    }
    return { slug: router.slug, models };
  });
}

export function poolSummaries(config: Pick<Config, 'pools' | 'services'>): PoolSummary[] {
  return config.pools.map((pool) => {
    const services: Record<string, number> = {};
    for (const s of config.services) if (s.replicas.pool === pool.name) services[s.slug] = s.replicas.units;
    return { name: pool.name, size: pool.size, services };
  });
}

/** `sluice check`'s lines for the routers and pools (none without them). */
export function summaryLines(config: Pick<Config, 'routers' | 'services' | 'pools' | 'basePath'>): string[] {
  const lines: string[] = [];
  for (const router of routerSummaries(config)) {
    const models = Object.entries(router.models).map(([model, service]) => `${model} → ${service}`);
    lines.push(`router ${router.slug} (${config.basePath}/${router.slug}/request/v1): ${models.length === 0 ? 'no models' : models.join(', ')}`);
  }
  for (const pool of poolSummaries(config)) {
    const services = Object.entries(pool.services).map(([slug, units]) => `${slug} (${units} ${units === 1 ? 'unit' : 'units'})`);
    lines.push(`pool ${pool.name} (${pool.size} ${pool.size === 1 ? 'unit' : 'units'}): ${services.length === 0 ? 'no services' : services.join(', ')}`);
  }
  return lines;
}
