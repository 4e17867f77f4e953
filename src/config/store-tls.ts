// TLS to the shared limit store (`limits.store: rediss://…`,
// docs/configuration.md#sharing-limits-across-gateways): `limits.storeCaFile`, the CA certificates
// to trust instead of Node's, and `limits.storeCertFile` with `limits.storeKeyFile`, the client
// certificate the gateway presents (a Redis with `tls-auth-clients yes`). Read when the config is
// (`check`, `serve`, a SIGHUP reload) and by the store's client (limits/store/limit-store-tls.ts) at
// start and on SIGHUP.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pemCertificates } from './certificate-expiry.js';
import { describeFsError } from './problems.js';
import { parseRedisUrl } from './redis-store.js';
import { checkTlsFiles } from './tls.js';

/** The PEM certificates in `file`, each parsed once. Throws StoreTlsError. */
export function readStoreCa(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'latin1');
  } catch (err) {
    throw new StoreTlsError(`cannot be read (${describeFsError(err)})`);
  }
  const certificates = pemCertificates(text);
  if (certificates.length === 0) throw new StoreTlsError('must hold one or more PEM certificates (-----BEGIN CERTIFICATE-----); none found');
  certificates.forEach((pem, i) => {
    try {
      new X509Certificate(pem);
    } catch (err) {
      const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
      throw new StoreTlsError(`must hold PEM certificates; certificate ${i + 1} cannot be parsed (${reason})`);
    }
  });
  return certificates;
}

/** The client certificate (its chain) and its key, as PEM text, once both files are found usable together. Throws StoreTlsError. */
export function readStoreClientCertificate(certFile: string, keyFile: string): { cert: string; key: string } {
  const problems = clientCertificateProblems(certFile, keyFile);
  if (problems.length > 0) throw new StoreTlsError(problems.map((p) => `limits.${p.key} ${p.value}: ${p.rule}`).join('; '));
  try {
    return { cert: readFileSync(certFile, 'latin1'), key: readFileSync(keyFile, 'latin1') };
  } catch (err) {
    throw new StoreTlsError(`cannot be read (${describeFsError(err)})`);
  }
}

function clientCertificateProblems(certFile: string, keyFile: string): Problem[] {
  return checkTlsFiles({ certFile, keyFile }, 'limits.storeCertFile').map((p) => ({ key: p.key === 'certFile' ? 'storeCertFile' : 'storeKeyFile', value: p.value, rule: p.rule }));
}

/** A TLS file of the store cannot be used; `message` is the rule it breaks. */
class StoreTlsError extends Error {
  readonly code = 'store_tls_file';
}

interface Problem {
  key: string;
  value: unknown;
  rule: string;
}

const ONLY_WITH_TLS = 'must be set only with a rediss:// limits.store (TLS)';

/** Problems of `limits` as a whole with TLS to the store (keys relative to `limits`). */
export function storeTlsProblems(limits: { store?: unknown; storeCaFile?: unknown; storeCertFile?: unknown; storeKeyFile?: unknown }): Problem[] {
  const { store, storeCaFile: ca, storeCertFile: cert, storeKeyFile: key } = limits;
  const given = (f: unknown): f is string => typeof f === 'string' && f !== '';
  const target = typeof store === 'string' ? parseRedisUrl(store) : undefined;
  // A malformed store is its own problem; the files are read anyway.
  if (target === undefined || ('host' in target && target.tls !== true)) {
    return (['storeCaFile', 'storeCertFile', 'storeKeyFile'] as const).filter((k) => given(limits[k])).map((k) => ({ key: k, value: limits[k], rule: ONLY_WITH_TLS }));
  }
  const problems: Problem[] = [];
  if (given(ca)) {
    try {
      readStoreCa(ca);
    } catch (err) {
      if (!(err instanceof StoreTlsError)) throw err;
      problems.push({ key: 'storeCaFile', value: ca, rule: err.message });
    }
  }
  if (given(cert) && given(key)) problems.push(...clientCertificateProblems(cert, key));
  else if (given(cert)) problems.push({ key: 'storeKeyFile', value: undefined, rule: 'must be set with limits.storeCertFile: the private key of the client certificate' });
  else if (given(key)) problems.push({ key: 'storeCertFile', value: undefined, rule: 'must be set with limits.storeKeyFile: the client certificate of that key' });
  return problems;
}
