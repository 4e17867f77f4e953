// The schema of routers (docs/configuration.md#many-models-behind-one-endpoint): a service's
// `models`, the top-level `routers`, and the checks across both (a model is served by one service;
// a router's slug is no service's; a router names services that exist and serve models).
import { z } from 'zod';
import { ALWAYS, isRecord, RULE, SLUG_RE, strict } from './rules.js';
import { limits } from './limits-schema.js';

/** `services[].models`: the names a router's requests choose the service by. */
export const models = z
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
  }, ALWAYS)
  .optional()
  .describe(`${RULE.models}; each name served by one service only`);

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
  if (!Array.isArray(c.routers)) return;
  const routerSlugs = new Map<string, number>();
  c.routers.forEach((r, i) => {
    if (!isRecord(r) || typeof r.slug !== 'string' || !SLUG_RE.test(r.slug)) return;
    if (slugs.has(r.slug)) ctx.addIssue({ code: 'custom', path: ['routers', i, 'slug'], input: r.slug, message: `${RULE.slugUnique} (also a service's slug)` });
    const first = routerSlugs.get(r.slug);
    if (first === undefined) routerSlugs.set(r.slug, i);
    else ctx.addIssue({ code: 'custom', path: ['routers', i, 'slug'], input: r.slug, message: `${RULE.slugUnique} (also routers[${first}].slug)` });
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
