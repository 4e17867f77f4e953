// The schema of limits per caller (docs/configuration.md#limits-per-caller): `limits` of a token or
// a service, and the top-level `limits` that says where the counters live.
import { z } from 'zod';
import { DEFAULTS, int, RULE, strict } from './rules.js';

/** `tokens[].limits` and `services[].limits`: every key optional. */
export const limits = strict(
  {
    requestsPerMinute: int(1, 1_000_000, RULE.requestsPerMinute).optional(),
    concurrent: int(1, 1_000_000, RULE.concurrent).optional(),
    tokensPerMinute: int(1, 1_000_000_000, RULE.tokensPerMinute).optional(),
  },
  RULE.limits,
)
  .optional()
  .describe(RULE.limits);

const REDIS_URL_RE = /^redis:\/\/[^\s/?#@]+:(\d{1,5})(\/(\d{1,5}))?$/;

const store = z
  .string({ error: RULE.store })
  .superRefine((url, ctx) => {
    const m = REDIS_URL_RE.exec(url);
    if (m === null || Number(m[1]) < 1 || Number(m[1]) > 65_535 || Number(m[3] ?? 0) > 65_535) {
      ctx.addIssue({ code: 'custom', message: RULE.store, input: url });
    }
  })
  .describe(RULE.store);

/** Top-level `limits`. */
export const limitStore = strict(
  {
    store: store.optional(),
    prefix: z
      .string({ error: RULE.limitsPrefix })
      .regex(/^[\x21-\x7e]{1,64}$/, { error: RULE.limitsPrefix })
      .describe(RULE.limitsPrefix)
      .prefault(DEFAULTS.limitsPrefix),
    onStoreDown: z.enum(['allow', 'refuse'], { error: RULE.onStoreDown }).describe(RULE.onStoreDown).prefault(DEFAULTS.onStoreDown),
  },
  RULE.limitStore,
);
