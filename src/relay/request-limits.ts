// A request's part in its token's limits (docs/api.md#limits-per-caller), around what the limit
// table does (limits/limit-table.ts): the 429 of a refused request, the reservation an admitted one
// takes from its body (limits/max-tokens.ts: `reserveTokens`), and the tokens it settles with at its end.
import { RelayError } from '../http/errors.js';
import type { LimitTable, TokenLimit } from '../limits/limit-table.js';
import { ratelimitRefused, ratelimitState } from '../limits/rate-limit-headers.js';
import type { FinishedRequest } from './finished-request.js';
import type { RelayRequest } from './relay.js';

const PER = { requestsPerMinute: 'requests per minute', concurrent: 'requests at once', tokensPerMinute: 'tokens per minute' } as const;

/** `429 rate_limited` for a request of `limit`'s token that `table.admit` just refused. */
export function rateLimited(table: LimitTable, limit: TokenLimit, tokenName: string): RelayError {
  const name = table.refusedBy;
  const retryAfter = table.retryAfter;
  return new RelayError('rate_limited', {
    message: `The limit ${name} of token "${tokenName}" (${limit.limits[name]} ${PER[name]}) is reached; retry in ${retryAfter} s.`,
    limit: name,
    headers: { 'retry-after': String(retryAfter), 'ratelimit-policy': limit.policy, ratelimit: ratelimitRefused(name, retryAfter) },
  });
}

/** `request` was admitted under `limit`: it ends in the table at its end, and its answer carries RateLimit-Policy and RateLimit. */
export function admitted(request: RelayRequest, limit: TokenLimit, table: LimitTable): void {
  request.limit = limit;
  request.downstream.ratelimit(limit.policy, ratelimitState(limit.limits, table));
}

/**
 * The tokens a finished request of a limited token settles with: what its answer reported (prompt
 * plus completion tokens: a JSON answer's `usage`, a stream's last `usage`), or a stream's data
 * events when it reported none (finished-request.ts). A complete answer with neither settles with
 * its reservation; a request whose caller left or whose replica failed before any of it was
 * counted gives its reservation back (docs/api.md#limits-per-caller).
 */
export function settledTokens(r: RelayRequest, f: FinishedRequest): number {
  if (f.usageReported || f.completionTokens > 0) return f.promptTokens + f.completionTokens;
  return f.outcome === 'ok' ? r.reserved : 0;
}
