// The schema of routers (docs/configuration.md#many-models-behind-one-endpoint): a service's
// `models`, the top-level `routers`, and the checks across both (a model is served by one service;
// a router's slug is no service's; a router names services that exist and serve models).
import { z } from 'zod';
import { ALWAYS, isRecord, RULE, SLUG_RE, strict } from './rules.js';
import { limits } from './limits-schema.js';

/** A non-empty list of model names, each once. */
const modelList = z
  .array(z.string({ error: RULE.model }).min(1, { error: RULE.model }).max(256, { error: RULE.model }), { error: RULE.models })
  .min(1, { error: RULE.models })
  .superRefine((list, ctx) => {
    if (!Array.isArray(list)) return;
    const seen = new Map<string, number>();
    list.forEach((m, i) => {
      const first = seen.get(m);
      if (first === undefined) seen.set(m, i);
      else ctx.addIssue({ code: 'custom', path: [i], input: m, message: `${RULE.modelUnique} (also models[${first}])` });
    });
  }, ALWAYS);

/** `services[].models`: the names a router's requests choose the service by. */
export const models = modelList.optional().describe(`${RULE.models}; each name served by one service only`);

/** `routers[].tokens[].models`: the models a router's token may use (not set: every model of the router). */
export const tokenModels = modelList.optional().describe(`${RULE.models}; each one a model the router serves`);

/** Top-level `routers`, built on the services' `tokens` schema. */
export function routerList<T extends z.ZodType>(tokens: T) {
  const router = strict({
    slug: z.string({ error: RULE.slug }).regex(SLUG_RE, { error: RULE.slug }).describe(`${RULE.slug}; unique among services and routers`),
    tokens,
    limits,
    services: z
      .array(z.string({ error: RULE.routerService }).regex(SLUG_RE, { error: RULE.routerService }), { error: RULE.routerServices })
      .min(1, { error: RULE.routerServices })
      .optional()
      .describe(`${RULE.routerServices}; not set: every service with models`),
  });
  return z.array(router, { error: RULE.routers }).describe(RULE.routers);
}

type Ctx = z.core.$RefinementCtx<unknown>;

/** The checks across services and routers, on the raw (partly valid) config: every problem at once. */
export function checkRouters(c: Record<string, unknown>, ctx: Ctx): void {
  const services = Array.isArray(c.services) ? c.services : [];
  const slugs = new Map<string, Record<string, unknown>>();
  const modelOwner = new Map<string, string>();
  services.forEach((s, i) => {
    if (!isRecord(s) || typeof s.slug !== 'string') return;
    slugs.set(s.slug, s);
    if (!Array.isArray(s.models)) return;
    s.models.forEach((m, j) => {
      if (typeof m !== 'string') return;
      const owner = modelOwner.get(m);
      if (owner === undefined) modelOwner.set(m, s.slug as string);
      else if (owner !== s.slug) ctx.addIssue({ code: 'custom', path: ['services', i, 'models', j], input: m, message: `${RULE.modelUnique} (also a model of service ${owner})` });
    });
  });
  const routed = routedServices(c, slugs, modelOwner);
  services.forEach((s, i) => {
    if (isRecord(s) && typeof s.slug === 'string' && (s.tokens === undefined || (Array.isArray(s.tokens) && s.tokens.length === 0)) && !routed.has(s.slug)) ctx.addIssue({ code: 'custom', path: ['services', i, 'tokens'], input: undefined, message: RULE.serviceUnreachable });
  });
  if (!Array.isArray(c.routers)) return;
  const routerSlugs = new Map<string, number>();
  c.routers.forEach((r, i) => {
    if (!isRecord(r) || typeof r.slug !== 'string' || !SLUG_RE.test(r.slug)) return;
    if (slugs.has(r.slug)) ctx.addIssue({ code: 'custom', path: ['routers', i, 'slug'], input: r.slug, message: `${RULE.slugUnique} (also a service's slug)` });
    const first = routerSlugs.get(r.slug);
    if (first === undefined) routerSlugs.set(r.slug, i);
    else ctx.addIssue({ code: 'custom', path: ['routers', i, 'slug'], input: r.slug, message: `${RULE.slugUnique} (also routers[${first}].slug)` });
    checkTokenModels(r, i, slugs, modelOwner, ctx);
    if (r.services === undefined) {
      if (modelOwner.size === 0) ctx.addIssue({ code: 'custom', path: ['routers', i], input: r.slug, message: RULE.routerNoModels });
      return;
    }
    if (!Array.isArray(r.services)) return;
    r.services.forEach((name, j) => {
      if (typeof name !== 'string' || !SLUG_RE.test(name)) return;
      const s = slugs.get(name);
      if (s === undefined) ctx.addIssue({ code: 'custom', path: ['routers', i, 'services', j], input: name, message: RULE.routerServiceUnknown });
      else if (!Array.isArray(s.models) || s.models.length === 0) ctx.addIssue({ code: 'custom', path: ['routers', i, 'services', j], input: name, message: RULE.routerServiceNoModels });
    });
  });
}

/** The slugs of the services some router routes to (those with models that a router names, or every one with models for a router naming none). */
function routedServices(c: Record<string, unknown>, slugs: ReadonlyMap<string, Record<string, unknown>>, modelOwner: ReadonlyMap<string, string>): Set<string> {
  const out = new Set<string>();
  if (!Array.isArray(c.routers)) return out;
  for (const r of c.routers) {
    if (!isRecord(r)) continue;
    if (r.services === undefined) for (const owner of modelOwner.values()) out.add(owner);
    else if (Array.isArray(r.services)) for (const name of r.services) if (typeof name === 'string' && Array.isArray(slugs.get(name)?.models)) out.add(name);
  }
  return out;
}

/** Each of router `r`'s tokens' `models` names a model `r` serves (a model of one of its services). */
function checkTokenModels(r: Record<string, unknown>, i: number, slugs: ReadonlyMap<string, Record<string, unknown>>, modelOwner: ReadonlyMap<string, string>, ctx: Ctx): void {
  if (!Array.isArray(r.tokens)) return;
  const named = Array.isArray(r.services) ? new Set(r.services.filter((name) => typeof name === 'string' && slugs.has(name))) : undefined;
  r.tokens.forEach((t, j) => {
    if (!isRecord(t) || !Array.isArray(t.models)) return;
    t.models.forEach((m, k) => {
      if (typeof m !== 'string' || m === '') return;
      const owner = modelOwner.get(m);
      if (owner !== undefined && (named === undefined || named.has(owner))) return;
      const why = owner === undefined ? `${m} is not one of services[].models` : `${m} is served by service ${owner}, which this router does not route to`;
      ctx.addIssue({ code: 'custom', path: ['routers', i, 'tokens', j, 'models', k], input: m, message: `${RULE.tokenModel} (${why})` });
    });
  });
}
