// TLS to the shared limit store (`limits.store: rediss://…`,
// docs/configuration.md#sharing-limits-across-gateways): `limits.storeCaFile`, the CA certificates
// to trust instead of Node's, read when the config is (`check`, `serve`, a SIGHUP reload) and by
// the store's client (control/limit-store.ts) at start and on SIGHUP.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describeFsError } from './problems.js';
import { parseRedisUrl } from './redis-store.js';

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** The PEM certificates in `file`, each parsed once. Throws StoreCaError. */
export function readStoreCa(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'latin1');
  } catch (err) {
    throw new StoreCaError(`cannot be read (${describeFsError(err)})`);
  }
  const certificates = text.match(PEM_CERTIFICATE) ?? [];
  if (certificates.length === 0) throw new StoreCaError('must hold one or more PEM certificates (-----BEGIN CERTIFICATE-----); none found');
  certificates.forEach((pem, i) => {
    try {
      new X509Certificate(pem);
    } catch (err) {
      const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
      throw new StoreCaError(`must hold PEM certificates; certificate ${i + 1} cannot be parsed (${reason})`);
    }
  });
  return certificates;
}

/** The CA file cannot give certificates; `message` is the rule it breaks. */
class StoreCaError extends Error {
  readonly code = 'store_ca_file';
}

/** Problems of `limits` as a whole with TLS to the store (keys relative to `limits`). */
export function storeTlsProblems(limits: { store?: unknown; storeCaFile?: unknown }): { key: string; value: unknown; rule: string }[] {
  const { store, storeCaFile: file } = limits;
  if (typeof file !== 'string' || file === '') return [];
  const target = typeof store === 'string' ? parseRedisUrl(store) : undefined;
  // A malformed store is its own problem; the file is read anyway.
  if (target === undefined || ('host' in target && target.tls !== true)) {
    return [{ key: 'storeCaFile', value: file, rule: 'must be set only with a rediss:// limits.store (TLS)' }];
  }
  try {
    readStoreCa(file);
  } catch (err) {
    if (!(err instanceof StoreCaError)) throw err;
    return [{ key: 'storeCaFile', value: file, rule: err.message }];
  }
  return [];
}
