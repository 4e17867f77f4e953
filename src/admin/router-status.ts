// A router as `/status` and the overview page show it (docs/operations.md#status): its base URL,
// the services it routes to, each model with the state of its service, and its limited tokens'
// use. Read at each `/status` call from the routers as last applied (start or SIGHUP) and the
// services' state now; nothing here runs per request.
import type { RouterConfig } from '../config/types.js';
import type { LimitUse } from '../limits/limit-control.js';
import { type ServiceState, serviceState } from './service-state.js';
import type { LiveService } from './status-source.js';

/** The routers as last applied and the models of each service then (the gateway's `RoutersReload`). */
export interface RoutersNow {
  routers: readonly RouterConfig[];
  models: readonly { slug: string; models?: string[] | undefined }[];
}

export interface RouterStatus {
  slug: string;
  /** What callers put before `/request{path}`, as a service's. */
  baseUrl: string;
  /** The services it routes to, in config order. */
  services: string[];
  /** Every model it routes, cold ones included, with its service and that service's state. */
  models: { id: string; service: string; state: ServiceState }[];
  /** Each limited token of the router: its name and its use against each limit it has. */
  limits: ({ token: string } & LimitUse)[];
}

/** The routers of `now` over the services `live`; `base`: the relay's origin and base path. */
export function routerStatuses(
  now: RoutersNow,
  live: readonly LiveService[],
  limited: readonly { service: string; token: string; use: LimitUse }[],
  base: string,
): RouterStatus[] {
  const bySlug = new Map(live.map((s) => [s.slug, s]));
  return now.routers.map((router) => {
    const named = router.services === undefined ? undefined : new Set(router.services);
    const services: string[] = [];
    const models: RouterStatus['models'] = [];
    for (const s of now.models) {
      const service = bySlug.get(s.slug);
      // A service added by a reload is not served before a restart: neither is its model.
      if (service === undefined || s.models === undefined || s.models.length === 0) continue;
      if (named !== undefined && !named.has(s.slug)) continue;
      services.push(s.slug);
      const state = serviceState(service);
      for (const id of s.models) models.push({ id, service: s.slug, state });
    }
    return {
      slug: router.slug,
      baseUrl: `${base}/${router.slug}`,
      services,
      models,
      limits: limited.filter((t) => t.service === router.slug).map((t) => ({ token: t.token, ...t.use })),
    };
  });
}
