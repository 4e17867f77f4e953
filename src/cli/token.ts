// Bearer tokens: `sluice token` makes one; the config stores only its digest (docs/configuration.md#tokens).
import { createHash, randomBytes } from 'node:crypto';

/** Prefix that makes a Sluice token recognizable (in a leaked-secret scan, or pasted in the wrong place). */
const TOKEN_PREFIX = 'slc_';

/** Lowercase hex SHA-256 digest of the UTF-8 bytes of `s`. */
export function sha256Hex(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex');
}

/** A new random token (`slc_` + base64url of 32 random bytes) and the digest to put in the config. */
function generateToken(): { token: string; sha256: string } {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  return { token, sha256: sha256Hex(token) };
}

/** `sluice token [--json] [--name NAME]`: a new token and the config line with its digest. */
export function tokenCommand(json: boolean, name: string | undefined): number {
  const { token, sha256 } = generateToken();
  if (json) {
    process.stdout.write(`${JSON.stringify({ token, sha256 })}\n`);
    return 0;
  }
  const shownName = name === undefined ? '<name>' : /^[A-Za-z0-9][A-Za-z0-9_.@-]*$/.test(name) ? name : JSON.stringify(name);
  process.stdout.write(
    [
      `token:  ${token}`,
      `sha256: ${sha256}`,
      '',
      "Give the token to the caller; add the digest to the service's tokens in the config:",
      `  - { name: ${shownName}, sha256: "${sha256}" }`,
      '',
    ].join('\n'),
  );
  return 0;
}
