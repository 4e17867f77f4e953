// The end of each certificate in use (gateway/certificate-watch.ts), read at each scrape: an alert
// on `sluice_tls_certificate_expiry_timestamp_seconds - time() < 14 * 86400` fires before callers
// or the limit store refuse the gateway.
import { Gauge, type Registry } from 'prom-client';

/** What a certificate is used for: the metric's `certificate` label. */
export type CertificateUse = 'listen' | 'limit_store_ca' | 'limit_store_client';

/** Where a certificate comes into use tells the watch (the limit store's client, on start and reload). */
export interface CertificatesInUse {
  /** `use` now holds the certificates of `pem`, read from `file`. */
  inUse(use: CertificateUse, file: string, pem: string): void;
}

/** One certificate in use as the metric reads it. */
export interface CertificateReading {
  /** What it is used for: `listen`, `limit_store_ca`, `limit_store_client`. */
  certificate: string;
  /** The earliest end among its file's certificates, in ms since the epoch. */
  notAfter: number;
}

export function registerCertificateMetrics(registry: Registry, read: () => readonly CertificateReading[]): void {
  new Gauge({
    name: 'sluice_tls_certificate_expiry_timestamp_seconds',
    help: 'When the earliest certificate of each TLS file in use ends (its notAfter), in seconds since the epoch: certificate="listen" (listen.tls.certFile, as served since the start), "limit_store_ca" (limits.storeCaFile) and "limit_store_client" (limits.storeCertFile), as last read.',
    labelNames: ['certificate'],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of read()) this.labels(r.certificate).set(r.notAfter / 1000);
    },
  });
}
