// Bearer tokens (contract section 2): `sluice token` makes one; the config stores only its digest.
import { createHash, randomBytes } from 'node:crypto';

/** Prefix that makes a Sluice token recognizable (in a leaked-secret scan, or pasted in the wrong place). */
export const TOKEN_PREFIX = 'slc_';

/** Lowercase hex SHA-256 digest of the UTF-8 bytes of `s`. */
export function sha256Hex(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex');
}

/** A new random token (`slc_` + base64url of 32 random bytes) and the digest to put in the config. */
export function generateToken(): { token: string; sha256: string } {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  return { token, sha256: sha256Hex(token) };
}
