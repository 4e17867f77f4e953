// The schema of limits per caller (docs/configuration.md#limits-per-caller): `limits` of a token or
// a service, and the top-level `limits` that says where the counters live.
import { z } from 'zod';
import { parseRedisUrl, shownRedisUrl, storeCredentialProblems } from './redis-store.js';
import { storeTlsProblems } from './store-tls.js';
import { ALWAYS, DEFAULTS, int, isRecord, nonEmptyString, RULE, strict } from './rules.js';

/** `tokens[].limits` and `services[].limits`: every key optional. */
export const limits = strict(
  {
    requestsPerMinute: int(1, 1_000_000, RULE.requestsPerMinute).optional(),
    concurrent: int(1, 1_000_000, RULE.concurrent).optional(),
    tokensPerMinute: int(1, 1_000_000_000, RULE.tokensPerMinute).optional(),
    tokensPerDay: int(1, 1_000_000_000, RULE.tokensPerDay).optional(),
    tokensPerMonth: int(1, 1_000_000_000, RULE.tokensPerMonth).optional(),
  },
  RULE.limits,
)
  .optional()
  .describe(RULE.limits);

// A problem's value is the URL with its password replaced (`sluice check` prints it).
const store = z
  .string({ error: RULE.store })
  .superRefine((url, ctx) => {
    const parsed = parseRedisUrl(url);
    if ('problem' in parsed) ctx.addIssue({ code: 'custom', message: parsed.problem, input: shownRedisUrl(url) });
  })
  .describe(RULE.store);

/** Top-level `limits`. */
export const limitStore = strict(
  {
    store: store.optional(),
    storePasswordFile: nonEmptyString(RULE.file).describe(RULE.storePasswordFile).optional(),
    storeCaFile: nonEmptyString(RULE.file).describe(RULE.storeCaFile).optional(),
    storeCertFile: nonEmptyString(RULE.file).describe(RULE.storeCertFile).optional(),
    storeKeyFile: nonEmptyString(RULE.file).describe(RULE.storeKeyFile).optional(),
    prefix: z
      .string({ error: RULE.limitsPrefix })
      .regex(/^[\x21-\x7e]{1,64}$/, { error: RULE.limitsPrefix })
      .describe(RULE.limitsPrefix)
      .prefault(DEFAULTS.limitsPrefix),
    onStoreDown: z.enum(['allow', 'refuse'], { error: RULE.onStoreDown }).describe(RULE.onStoreDown).prefault(DEFAULTS.onStoreDown),
  },
  RULE.limitStore,
).superRefine((l, ctx) => {
  // The password and TLS files are read here (by `check`, `serve` and a SIGHUP reload), as listen.tls's files are.
  if (isRecord(l)) for (const p of [...storeCredentialProblems(l), ...storeTlsProblems(l)]) ctx.addIssue({ code: 'custom', path: [p.key], input: p.value, message: p.rule });
}, ALWAYS);
