// TLS to the shared store (`limits.store: rediss://…`, docs/architecture.md#the-shared-store): what
// the Redis client trusts (`limits.storeCaFile`; none: Node's CAs) and presents
// (`limits.storeCertFile` and `limits.storeKeyFile`), read at start and again on SIGHUP, and the
// errors that say a handshake failed. node-redis keeps the arrays given in its socket options
// (they are copied shallowly) and Node builds each connection's TLS context from them, so
// refilling them in place changes what the next connection trusts and presents, without a new
// client (test/limits/limits-store-tls.test.ts shows a refill ending an outage).
import type { Logger } from '../../log/logger.js';
import { readStoreCa, readStoreClientCertificate } from '../../config/store-tls.js';
import type { CertificatesInUse } from '../../metrics/certificate-metrics.js';

export interface StoreTlsFiles {
  caFile?: string | undefined;
  certFile?: string | undefined;
  keyFile?: string | undefined;
}

/** What node-redis's socket options add for TLS (Node verifies the certificate and checks its name against the host; a name is sent as SNI). */
interface TlsSocketOptions {
  tls: true;
  ca?: string[];
  cert?: string[];
  key?: string[];
}

export class StoreTls {
  private readonly ca: string[] | undefined;
  /** The client certificate (chain) and its key: one of each. */
  private readonly cert: string[] | undefined;
  private readonly key: string[] | undefined;

  /** Reads the files (validated with the config a moment ago); throws naming the file if one has changed since. */
  constructor(
    private readonly files: StoreTlsFiles,
    private readonly shown: string,
    private readonly logger: Logger,
    private readonly certificates: CertificatesInUse | undefined,
  ) {
    if (files.caFile !== undefined) {
      try {
        this.ca = readStoreCa(files.caFile);
      } catch (err) {
        throw new Error(`limits.storeCaFile ${files.caFile}: ${reason(err)}`);
      }
      certificates?.inUse('limit_store_ca', files.caFile, this.ca.join('\n'));
    }
    if (files.certFile !== undefined && files.keyFile !== undefined) {
      const { cert, key } = readStoreClientCertificate(files.certFile, files.keyFile);
      this.cert = [cert];
      this.key = [key];
      certificates?.inUse('limit_store_client', files.certFile, cert);
    }
  }

  /** The socket options of a TLS store: these arrays, kept by the client. */
  socketOptions(): TlsSocketOptions {
    return { tls: true, ...(this.ca === undefined ? {} : { ca: this.ca }), ...(this.cert === undefined || this.key === undefined ? {} : { cert: this.cert, key: this.key }) };
  }

  /** SIGHUP: the files read again, changes used from the next connection (the one open stays). An unreadable file keeps what is in use. */
  reload(): void {
    const { caFile, certFile, keyFile } = this.files;
    if (caFile !== undefined && this.ca !== undefined) {
      let certificates: string[] | undefined;
      try {
        certificates = readStoreCa(caFile);
      } catch (err) {
        this.logger.error({ store: this.shown, file: caFile, reason: reason(err) }, 'limit store CA not reloaded');
      }
      if (certificates !== undefined && refill(this.ca, certificates)) {
        this.logger.info({ store: this.shown, file: caFile, certificates: certificates.length }, 'limit store CA reloaded');
        this.certificates?.inUse('limit_store_ca', caFile, certificates.join('\n'));
      }
    }
    if (certFile !== undefined && keyFile !== undefined && this.cert !== undefined && this.key !== undefined) {
      let pair: { cert: string; key: string } | undefined;
      try {
        pair = readStoreClientCertificate(certFile, keyFile);
      } catch (err) {
        this.logger.error({ store: this.shown, certFile, keyFile, reason: reason(err) }, 'limit store client certificate not reloaded');
      }
      // Both or neither: a key is never paired with another certificate.
      if (pair !== undefined && (pair.cert !== this.cert[0] || pair.key !== this.key[0])) {
        refill(this.cert, [pair.cert]);
        refill(this.key, [pair.key]);
        this.logger.info({ store: this.shown, certFile, keyFile }, 'limit store client certificate reloaded');
        this.certificates?.inUse('limit_store_client', certFile, pair.cert);
      }
    }
  }
}

/** Replaces `held`'s content by `now`'s, in place; whether it changed. */
function refill(held: string[], now: readonly string[]): boolean {
  if (held.length === now.length && held.every((c, i) => c === now[i])) return false;
  held.splice(0, held.length, ...now);
  return true;
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// OpenSSL's verification results as Node names them (UNABLE_TO_VERIFY_LEAF_SIGNATURE,
// SELF_SIGNED_CERT_IN_CHAIN, CERT_HAS_EXPIRED, …), Node's own TLS errors
// (ERR_TLS_CERT_ALTNAME_INVALID) and OpenSSL's (ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED).
const TLS_CODE = /^(?:ERR_TLS_|ERR_SSL_|UNABLE_TO_|CERT_|CRL_|ERROR_IN_C|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|INVALID_CA$|INVALID_PURPOSE$|PATH_LENGTH_EXCEEDED$|HOSTNAME_MISMATCH$)/;

/** The errors that say a TLS handshake with the store failed: its code, for the log. */
export function tlsFailure(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && TLS_CODE.test(code) ? code : undefined;
}
