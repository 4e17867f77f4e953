// A request's part in its token's limits (docs/api.md#limits-per-caller), around what the limit
// table does (limits/limit-table.ts): the 429 of a refused request (or the 503 while the shared
// store is down), the wait of one whose lease from the shared store ran out, the reservation an
// admitted one takes from its body (limits/max-tokens.ts: `reserveTokens`), and the tokens it
// settles with at its end.
import { RelayError } from '../http/errors.js';
import type { LimitName } from '../limits/limit-layout.js';
import type { LimitTable, TokenLimit } from '../limits/limit-table.js';
import { reserveTokens } from '../limits/max-tokens.js';
import { LIMIT_STORE_WAIT_MS } from '../tunables.js';
import { ratelimitRefused, ratelimitState } from '../limits/rate-limit-headers.js';
import type { FinishedRequest } from './finished-request.js';
import type { RelayRequest } from './relay.js';

/** Each limit in words, for a limit of one and for more. */
const PER = {
  requestsPerMinute: ['request per minute', 'requests per minute'],
  concurrent: ['request at once', 'requests at once'],
  tokensPerMinute: ['token per minute', 'tokens per minute'],
} as const;

/** `429 rate_limited` for a request of `limit`'s token that `table.admit` just refused. */
function rateLimited(table: LimitTable, limit: TokenLimit, tokenName: string): RelayError {
  const name = table.refusedBy;
  const retryAfter = table.retryAfter;
  const quota = limit.limits[name];
  return new RelayError('rate_limited', {
    message: `The limit ${name} of token "${tokenName}" (${quota} ${PER[name][quota === 1 ? 0 : 1]}) is reached; retry in ${retryAfter} s.`,
    limit: name,
    headers: { 'retry-after': String(retryAfter), 'ratelimit-policy': limit.policy, ratelimit: ratelimitRefused(name, retryAfter) },
  });
}

/** The error of a request that `table.admit` did not admit: `429 rate_limited`, or `503 limits_unavailable` (the store is down, `onStoreDown: refuse`). */
export function refusedByLimits(verdict: LimitName | 'unavailable', table: LimitTable, limit: TokenLimit, tokenName: string): RelayError {
  return verdict === 'unavailable' ? new RelayError('limits_unavailable', { headers: { 'retry-after': '1' } }) : rateLimited(table, limit, tokenName);
}

/** `request` was admitted under `limit`: it ends in the table at its end, and its answer carries RateLimit-Policy and RateLimit. */
export function admitted(request: RelayRequest, limit: TokenLimit, table: LimitTable): void {
  request.limit = limit;
  request.downstream.ratelimit(limit.policy, ratelimitState(limit.limits, table));
}

/**
 * A request whose token's lease from the shared store ran out (`admit` said `wait`; the request
 * is built, its body arriving): it waits for the control plane's top-up, at most
 * LIMIT_STORE_WAIT_MS, then is admitted and started, or refused. Off the hot path: a lease is
 * asked for before it runs out.
 */
export function waitForLimits(request: RelayRequest, limit: TokenLimit, table: LimitTable, tokenName: string): void {
  const deadline = performance.now() + LIMIT_STORE_WAIT_MS;
  const wait = (): void => {
    const waiting = table.topUp(limit, Math.max(1, deadline - performance.now()));
    if (waiting === undefined) setImmediate(decide);
    else void waiting.then(decide);
  };
  const decide = (): void => {
    if (request.phase === 'done') return; // the caller left meanwhile
    // A top-up that others took first: the request asks again while its time lasts.
    const verdict = table.admit(limit, performance.now() >= deadline);
    if (verdict === 'wait') wait();
    else if (verdict === undefined) {
      admitted(request, limit, table);
      // Its body's first bytes may have come while it waited: its reservation is taken now.
      if (request.body.hasStarted) request.reserved = reserveTokens(table, limit, request.body.firstBytes());
      request.start();
    } else request.refuse(refusedByLimits(verdict, table, limit, tokenName));
  };
  wait();
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
