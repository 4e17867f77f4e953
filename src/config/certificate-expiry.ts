// When the certificates the gateway serves and trusts stop being valid: the listener's
// (`listen.tls.certFile`, its chain included) and the limit store's (`limits.storeCaFile`,
// `limits.storeCertFile`). Every certificate of a file counts: an expired intermediate breaks a
// chain as surely as an expired leaf. `check` prints the warnings; a running gateway logs them and
// exports each file's earliest end (gateway/certificate-watch.ts).
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** One certificate of a PEM file: its subject, and its validity in ms since the epoch. */
export interface CertificateDates {
  subject: string;
  notBefore: number;
  notAfter: number;
}

/** A certificate is warned about from this many days before it ends. */
export const EXPIRY_WARNING_DAYS = 14;

const DAY_MS = 86_400_000;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** The PEM certificate blocks of `text`, in file order (a chain, a CA bundle). */
export function pemCertificates(text: string): string[] {
  return text.match(PEM_CERTIFICATE) ?? [];
}

/** The certificates of PEM text, in file order; one that cannot be parsed is skipped (the config's checks report it). */
export function certificateDates(pem: string): CertificateDates[] {
  const dates: CertificateDates[] = [];
  for (const block of pemCertificates(pem)) {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(block);
    } catch {
      continue;
    }
    dates.push({ subject: cert.subject.replace(/\n/g, ', '), notBefore: Date.parse(cert.validFrom), notAfter: Date.parse(cert.validTo) });
  }
  return dates;
}

/** The certificates of a PEM file; none if it cannot be read (the config's checks report that). */
export function readCertificateDates(file: string): CertificateDates[] {
  try {
    return certificateDates(readFileSync(file, 'latin1'));
  } catch {
    return [];
  }
}

/**
 * Warnings about the certificates of one file (`where`: its key and path): expired, not valid
 * yet, or ending within `soonDays`. A file of one certificate says "the certificate"; in a chain
 * or a bundle each is named by its place and subject.
 */
export function expiryWarnings(where: string, certificates: readonly CertificateDates[], now = Date.now(), soonDays = EXPIRY_WARNING_DAYS): string[] {
  const warnings: string[] = [];
  certificates.forEach((c, i) => {
    const which = certificates.length === 1 ? 'the certificate' : `certificate ${i + 1} (${c.subject})`;
    if (now > c.notAfter) warnings.push(`${where}: ${which} expired on ${iso(c.notAfter)}`);
    else if (now < c.notBefore) warnings.push(`${where}: ${which} is not valid until ${iso(c.notBefore)}`);
    else {
      const days = Math.floor((c.notAfter - now) / DAY_MS);
      if (days < soonDays) warnings.push(`${where}: ${which} expires on ${iso(c.notAfter)} (in ${days} ${days === 1 ? 'day' : 'days'})`);
    }
  });
  return warnings;
}

/** The earliest end among `certificates` (ms since the epoch), or undefined for none. */
export function earliestExpiry(certificates: readonly CertificateDates[]): number | undefined {
  let earliest: number | undefined;
  for (const c of certificates) if (earliest === undefined || c.notAfter < earliest) earliest = c.notAfter;
  return earliest;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
