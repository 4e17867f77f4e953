// The certificates the gateway has in use, and when they end: the listener's, as uWS read it at
// start, and the limit store's CA and client certificate, as the store's client holds them (read at
// start, and again by a SIGHUP that changed them: limit-store-tls.ts). Each is warned about when
// it comes into use and then once a day (expired, not valid yet, ending within 14 days), so a
// gateway that runs for months says so before its certificate ends, not only at its start; the
// scrape reads each one's earliest end (sluice_tls_certificate_expiry_timestamp_seconds).
import { type CertificateDates, certificateDates, earliestExpiry, expiryWarnings, readCertificateDates } from '../config/certificate-expiry.js';
import type { Logger } from '../log/logger.js';
import type { CertificateReading, CertificatesInUse, CertificateUse } from '../metrics/certificate-metrics.js';

/** The config key of each use, as warnings and problems name it. */
const KEY: Record<CertificateUse, string> = {
  listen: 'listen.tls.certFile',
  limit_store_ca: 'limits.storeCaFile',
  limit_store_client: 'limits.storeCertFile',
};

const DAY_MS = 86_400_000;

export class CertificateWatch implements CertificatesInUse {
  private readonly held = new Map<CertificateUse, { file: string; dates: CertificateDates[] }>();
  private readonly timer: NodeJS.Timeout;

  /** `everyMs`: how often every certificate in use is looked at again (a day). */
  constructor(
    private readonly logger: Logger,
    everyMs = DAY_MS,
  ) {
    this.timer = setInterval(() => {
      for (const use of this.held.keys()) this.warn(use);
    }, everyMs).unref();
  }

  inUse(use: CertificateUse, file: string, pem: string): void {
    this.held.set(use, { file, dates: certificateDates(pem) });
    this.warn(use);
  }

  /** The listener's certificate file, read as uWS read it a moment ago. */
  inUseFile(use: CertificateUse, file: string): void {
    this.held.set(use, { file, dates: readCertificateDates(file) });
    this.warn(use);
  }

  /** Each use's earliest end, for the scrape. */
  readings(): CertificateReading[] {
    const readings: CertificateReading[] = [];
    for (const [certificate, { dates }] of this.held) {
      const notAfter = earliestExpiry(dates);
      if (notAfter !== undefined) readings.push({ certificate, notAfter });
    }
    return readings;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private warn(use: CertificateUse): void {
    const { file, dates } = this.held.get(use)!;
    for (const warning of expiryWarnings(`${KEY[use]} ${file}`, dates)) this.logger.warn({ certificate: use, file, warning }, 'TLS certificate warning');
  }
}
