// What a request reserves of its token's tokensPerMinute (docs/api.md#limits-per-caller): the
// `max_completion_tokens` its JSON body names, else its `max_tokens`, else 0. Read from the body's
// first bytes where they already are (the whole body, for most requests; else its first piece), by
// a native search for each key and a few bytes of number after it: no parse, no copy. Asked only
// for a token with a tokensPerMinute limit. The search does not tell the top level from a nested
// object (a tool's JSON schema naming `max_tokens` would count): a reservation is a bound that the
// answer's usage replaces at the request's end, not a charge.
import type { LimitTable, TokenLimit } from './limit-table.js';

const MAX_COMPLETION_TOKENS = Buffer.from('"max_completion_tokens"');
const MAX_TOKENS = Buffer.from('"max_tokens"');
/** The largest reservation: a body cannot hold more than the largest tokensPerMinute. */
const MAX_RESERVATION = 1_000_000_000;

/** The tokens `body` (its first bytes) asks for at most, or 0. */
function reservedTokens(body: Uint8Array | undefined): number {
  if (body === undefined || body.length === 0) return 0;
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const completion = numberAfter(b, MAX_COMPLETION_TOKENS);
  return completion >= 0 ? completion : Math.max(0, numberAfter(b, MAX_TOKENS));
}

/** The non-negative integer that follows `key` and a colon in `b`, or -1. */
function numberAfter(b: Buffer, key: Buffer): number {
  let i = b.indexOf(key);
  if (i < 0) return -1;
  i += key.length;
  while (i < b.length && isSpace(b[i]!)) i++;
  if (b[i] !== 0x3a) return -1;
  i++;
  while (i < b.length && isSpace(b[i]!)) i++;
  let n = -1;
  while (i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39) {
    n = (n < 0 ? 0 : n * 10) + (b[i]! - 0x30);
    if (n > MAX_RESERVATION) return MAX_RESERVATION;
    i++;
  }
  return n;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The reservation of a request of `limit`'s token whose body's first bytes are `first`: taken now. */
export function reserveTokens(table: LimitTable, limit: TokenLimit, first: Uint8Array | undefined): number {
  if (limit.limits.tokensPerMinute === undefined) return 0;
  const tokens = reservedTokens(first);
  table.reserve(limit, tokens);
  return tokens;
}
