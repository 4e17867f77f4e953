// The `RateLimit-Policy` and `RateLimit` header fields of a limited token's answers, as
// draft-ietf-httpapi-ratelimit-headers-10 writes them (structured field lists): one policy item
// per limit the token has, named after it:
//   RateLimit-Policy: "requests";q=60;w=60, "concurrent";q=4;qu="concurrent-requests", "tokens";q=100000;w=60;qu="tokens"
//   RateLimit: "requests";r=59;t=1, "concurrent";r=3, "tokens";r=99000;t=42
// `q` the quota, `w` its window in seconds, `qu` its unit (requests unless said), `r` what is left
// now, `t` seconds until the quota is whole again. "tokens" (LLM tokens) is not among the draft's
// registered units; a client that does not know it may ignore that item. tokensPerDay and
// tokensPerMonth are "tokens-day" and "tokens-month", with no `w` (their windows are the calendar
// day and month in UTC, not a length): `t` is the time to the next reset.
import type { LimitsConfig } from '../config/types.js';
import type { LimitTable } from './limit-table.js';

/** The `RateLimit-Policy` value of a token with `limits`. */
export function ratelimitPolicy(limits: LimitsConfig): string {
  const items: string[] = [];
  if (limits.requestsPerMinute !== undefined) items.push(`"requests";q=${limits.requestsPerMinute};w=60`);
  if (limits.concurrent !== undefined) items.push(`"concurrent";q=${limits.concurrent};qu="concurrent-requests"`);
  if (limits.tokensPerMinute !== undefined) items.push(`"tokens";q=${limits.tokensPerMinute};w=60;qu="tokens"`);
  if (limits.tokensPerDay !== undefined) items.push(`"tokens-day";q=${limits.tokensPerDay};qu="tokens"`);
  if (limits.tokensPerMonth !== undefined) items.push(`"tokens-month";q=${limits.tokensPerMonth};qu="tokens"`);
  return items.join(', ');
}

/** The `RateLimit` value after `table.admit` admitted a request with `limits` (what is left then). */
export function ratelimitState(limits: LimitsConfig, table: LimitTable): string {
  let value = '';
  if (limits.requestsPerMinute !== undefined) value = `"requests";r=${table.leftRequests};t=${table.resetRequestsS}`;
  if (limits.concurrent !== undefined) value += `${value === '' ? '' : ', '}"concurrent";r=${table.leftConcurrent}`;
  if (limits.tokensPerMinute !== undefined) value += `${value === '' ? '' : ', '}"tokens";r=${table.leftTokens};t=${table.resetTokensS}`;
  if (limits.tokensPerDay !== undefined) value += `${value === '' ? '' : ', '}"tokens-day";r=${table.leftDay};t=${table.resetDayS}`;
  if (limits.tokensPerMonth !== undefined) value += `${value === '' ? '' : ', '}"tokens-month";r=${table.leftMonth};t=${table.resetMonthS}`;
  return value;
}

/** Each limit's item in the header fields. */
const ITEM: Record<string, string> = { requestsPerMinute: 'requests', concurrent: 'concurrent', tokensPerMinute: 'tokens', tokensPerDay: 'tokens-day', tokensPerMonth: 'tokens-month' };

/** The `RateLimit` value of a refusal by `limit`: nothing left of it for `retryAfter` seconds. */
export function ratelimitRefused(limit: string, retryAfter: number): string {
  const name = ITEM[limit] ?? 'tokens';
  return limit === 'concurrent' ? `"${name}";r=0` : `"${name}";r=0;t=${retryAfter}`;
}
