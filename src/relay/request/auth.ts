// Bearer authentication. The config holds only SHA-256 digests; the
// presented token is hashed and compared with every digest of the service in constant time.
//
// Cost: about 0.6 µs per request: the regex 0.1, the hash 0.5 (sha256.ts: SHA-256 in JavaScript,
// where `crypto.hash` cost 2–3 µs on the request path), each comparison a few nanoseconds. It is
// not cached, on purpose: a cache that skips the hash must hold the presented token itself (or
// something as good as it) to recognise it again, so a valid token would live in the heap for
// the life of the process, where today only digests do and a presented token lives only as long
// as its request; and a Map keyed by presented strings compares them with an early exit (not
// constant time) and, holding wrong tokens too, grows without bound.
import type { LimitsConfig, RouterTokenConfig } from '../../config/types.js';
import { effectiveLimits } from '../../limits/limit-cells.js';
import { type LimitTable, type TokenLimit, tokenLimit } from '../../limits/limit-table.js';
import { ratelimitPolicy } from '../../limits/rate-limit-headers.js';
import { digestWords, sameDigest, sha256Ascii } from './sha256.js';

/** The challenge of a 401 for a missing token, and for a wrong one. */
export const WWW_AUTHENTICATE = 'Bearer realm="sluice"';
export const WWW_AUTHENTICATE_INVALID = 'Bearer realm="sluice", error="invalid_token"';

export interface TokenEntry {
  /** The token's name from the config: what logs show instead of the token. */
  readonly name: string;
  /** The token's SHA-256 digest as `sha256Ascii` gives it. */
  readonly digest: Int32Array;
  /** Its requests' priority in the queue. */
  readonly priority: number;
  /** Its limits' cell set in the limit table, if it has limits (docs/api.md#limits-per-caller). */
  readonly limit: TokenLimit | undefined;
  /** Where this thread counts its LLM token usage (metrics/token-usage.ts); -1: nowhere. */
  readonly usagePlace: number;
  /** A router's token scoped to models: those it may use (others are `404 model_not_found` for it); undefined: every one. */
  readonly models: ReadonlySet<string> | undefined;
  /**
   * Set when a reload replaced this thread's token table: the entry that has this token's digest
   * now, or null when none has (the token was removed). Undefined while it is current.
   */
  replacedBy?: TokenEntry | null;
}

/** Why a request was not authenticated: `missing` and `invalid` are 401, `malformed` is 400. */
export type AuthFailure = 'missing' | 'malformed' | 'invalid';

/**
 * The service's tokens as the hot path reads them. `cells`: each token's cell set in `table`, or -1
 * (the control plane's assignment: limits/limit-cells.ts); `serviceLimits` apply to a token with none.
 * `placeOf` gives each its place for LLM token usage (at build time, not per request).
 */
export function tokenEntries(
  tokens: readonly RouterTokenConfig[],
  serviceLimits?: LimitsConfig,
  cells?: readonly number[],
  table?: LimitTable,
  placeOf: (name: string) => number = () => -1,
): TokenEntry[] {
  return tokens.map((t, i) => {
    const limits = effectiveLimits({ limits: serviceLimits }, t);
    const cell = cells?.[i] ?? -1;
    const limit = limits === undefined || cell < 0 || table === undefined ? undefined : tokenLimit(table, cell, limits, ratelimitPolicy(limits));
    const models = t.models === undefined ? undefined : new Set(t.models);
    return { name: t.name, digest: digestWords(Buffer.from(t.sha256, 'hex')), priority: t.priority, limit, usagePlace: placeOf(t.name), models };
  });
}

// RFC 6750 section 2.1: credentials = "Bearer" 1*SP b64token; b64token = 1*( ALPHA / DIGIT /
// "-" / "." / "_" / "~" / "+" / "/" ) *"=". The scheme is case-insensitive (RFC 9110 section 11.1).
// A b64token is ASCII, as `sha256Ascii` needs.
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * Checks an Authorization header value against the service's tokens. Every digest is compared,
 * whichever matches, so the time taken does not depend on which token (if any) was presented.
 */
export function authenticate(header: string | undefined, tokens: readonly TokenEntry[]): TokenEntry | AuthFailure {
  if (header === undefined || header === '') return 'missing';
  const match = BEARER.exec(header);
  if (match === null) return 'malformed';
  const digest = sha256Ascii(match[1]!);
  let found: TokenEntry | undefined;
  for (let i = 0; i < tokens.length; i++) {
    if (sameDigest(digest, tokens[i]!.digest) && found === undefined) found = tokens[i];
  }
  return found ?? 'invalid';
}

/**
 * Whether the bearer token of `header` (one `authenticate` found in no table of the endpoint it was
 * sent to) is in one of `tables`: those of the endpoints of the other kind (routers for a service,
 * services for a router), so that its 401 can say so. Only on that refusal's path; every digest is
 * compared, as `authenticate` does.
 */
export function heldElsewhere(header: string, tables: Iterable<readonly TokenEntry[]>): boolean {
  const match = BEARER.exec(header);
  if (match === null) return false;
  const digest = sha256Ascii(match[1]!);
  let found = false;
  for (const tokens of tables) for (let i = 0; i < tokens.length; i++) if (sameDigest(digest, tokens[i]!.digest)) found = true;
  return found;
}

/** A reload replaced the token table `before` by `now`: each entry of `before` points to the entry of `now` with its digest, or to null. */
export function supersede(before: readonly TokenEntry[], now: readonly TokenEntry[]): void {
  for (const old of before) old.replacedBy = now.find((entry) => sameDigest(entry.digest, old.digest)) ?? null;
}

/**
 * The entry that holds `token`'s digest now, after the reloads this thread applied since the
 * request authenticated with it; undefined when its token was removed.
 */
export function currentEntry(token: TokenEntry): TokenEntry | undefined {
  let entry: TokenEntry | null | undefined = token;
  while (entry !== null && entry !== undefined && entry.replacedBy !== undefined) entry = entry.replacedBy;
  return entry ?? undefined;
}
