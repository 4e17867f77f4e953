// When the config first named each model a service serves, in this gateway's life: the `created`
// of the router's model objects (docs/api.md#routers). Decided on the main thread, at start and at
// each reload, and handed to every data plane with the routers, so every thread says the same: a
// model named at start has the gateway's start time, one a reload added has that reload's, one
// removed and named again the time it came back. Unix seconds, as OpenAI's `created`.
import type { Config } from '../config/types.js';

/** Each model of `config`'s services, with its time from `before` (the last reload's) or now. */
export function modelBirths(config: Config, before: Readonly<Record<string, number>>, nowMs: number): Record<string, number> {
  const now = Math.floor(nowMs / 1000);
  const out: Record<string, number> = {};
  for (const service of config.services) for (const model of service.models ?? []) out[model] = before[model] ?? now;
  return out;
}
