// Bearer authentication (contract section 2). The config holds only SHA-256 digests; the
// presented token is hashed and compared with every digest of the service in constant time.
//
// Cost: about 1.5 µs per request, of which `crypto.hash` is about 1.2 (the regex 0.1, each
// comparison under 0.1). It is not cached, on purpose: a cache that skips the hash must hold
// the presented token itself (or something as good as it) to recognise it again, so a valid
// token would live in the heap for the life of the process, where today only digests do and a
// presented token lives only as long as its request; and a Map keyed by presented strings
// compares them with an early exit (not constant time) and, holding wrong tokens too, grows
// without bound. Measured with a one-off script timing `authenticate` against two entries.
import { hash, timingSafeEqual } from 'node:crypto';
import type { TokenConfig } from '../config-types.js';

export interface TokenEntry {
  /** The token's name from the config: what logs show instead of the token. */
  readonly name: string;
  readonly digest: Buffer;
}

/** Why a request was not authenticated: `missing` and `invalid` are 401, `malformed` is 400. */
export type AuthFailure = 'missing' | 'malformed' | 'invalid';

export function tokenEntries(tokens: readonly TokenConfig[]): TokenEntry[] {
  return tokens.map((t) => ({ name: t.name, digest: Buffer.from(t.sha256, 'hex') }));
}

// RFC 6750 section 2.1: credentials = "Bearer" 1*SP b64token; b64token = 1*( ALPHA / DIGIT /
// "-" / "." / "_" / "~" / "+" / "/" ) *"=". The scheme is case-insensitive (RFC 9110 section 11.1).
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * Checks an Authorization header value against the service's tokens. Every digest is compared,
 * whichever matches, so the time taken does not depend on which token (if any) was presented.
 */
export function authenticate(header: string | undefined, tokens: readonly TokenEntry[]): TokenEntry | AuthFailure {
  if (header === undefined || header === '') return 'missing';
  const match = BEARER.exec(header);
  if (match === null) return 'malformed';
  const digest = hash('sha256', match[1]!, 'buffer');
  let found: TokenEntry | undefined;
  for (let i = 0; i < tokens.length; i++) {
    if (timingSafeEqual(digest, tokens[i]!.digest) && found === undefined) found = tokens[i];
  }
  return found ?? 'invalid';
}
