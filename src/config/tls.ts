// listen.tls: the certificate and key files are checked when the config is loaded (by `check`,
// `serve` and a SIGHUP reload), so a missing, unreadable or wrong file is reported as a config
// problem naming the key and the file, instead of uWS failing later with no reason. The same
// checks serve the limit store's client certificate (config/store-tls.ts).
// uWS reads both files itself (OpenSSL, PEM only); these checks use node:crypto on the same bytes.
import { createHash, createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { EXPIRY_WARNING_DAYS, expiryWarnings, readCertificateDates } from './certificate-expiry.js';
import { describeFsError } from './problems.js';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

/** One problem with a TLS file: which key (`certFile` or `keyFile`), and the rule it breaks. */
export interface TlsProblem {
  key: keyof TlsFiles;
  value: string;
  rule: string;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;
const PEM_PRIVATE_KEY = /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;
const PEM_ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/;

/**
 * Reads both files and checks that the certificate file holds a PEM certificate (a chain may
 * follow it), the key file an unencrypted PEM private key, and that the key belongs to the
 * certificate. Returns every problem found (none when the pair can be served). `certKey`: the
 * certificate file's key, as a mismatched key's rule names it.
 */
export function checkTlsFiles(tls: TlsFiles, certKey = 'listen.tls.certFile'): TlsProblem[] {
  const problems: TlsProblem[] = [];
  const cert = readCertificate(tls.certFile, problems);
  const key = readPrivateKey(tls.keyFile, problems);
  if (cert !== undefined && key !== undefined && !matches(cert, key)) {
    problems.push({ key: 'keyFile', value: tls.keyFile, rule: `must be the private key of the certificate in ${certKey} (${tls.certFile}); it is another key` });
  }
  return problems;
}

/**
 * Warnings about a certificate that can be served but that clients will refuse, or soon will:
 * any certificate of the file (the chain too) expired, not valid yet, or ending within `soonDays`
 * (config/certificate-expiry.ts). `check` prints them and a running gateway logs them; they do not
 * stop a start (a gateway serving an expired certificate is visibly broken, one refusing to start
 * during a renewal incident is worse).
 */
export function tlsWarnings(tls: TlsFiles, now = Date.now(), soonDays = EXPIRY_WARNING_DAYS): string[] {
  return expiryWarnings(`listen.tls.certFile ${tls.certFile}`, readCertificateDates(tls.certFile), now, soonDays);
}

/** A digest of both files' contents, to notice a renewed certificate on SIGHUP (undefined if unreadable). */
export function tlsFingerprint(tls: TlsFiles): string | undefined {
  try {
    return createHash('sha256').update(readFileSync(tls.certFile)).update('\0').update(readFileSync(tls.keyFile)).digest('hex');
  } catch {
    return undefined;
  }
}

function readText(file: string, key: keyof TlsFiles, problems: TlsProblem[]): string | undefined {
  try {
    return readFileSync(file, 'latin1');
  } catch (err) {
    problems.push({ key, value: file, rule: `cannot be read (${describeFsError(err)})` });
    return undefined;
  }
}

function readCertificate(file: string, problems: TlsProblem[]): X509Certificate | undefined {
  const text = readText(file, 'certFile', problems);
  if (text === undefined) return undefined;
  if (!PEM_CERTIFICATE.test(text)) {
    problems.push({ key: 'certFile', value: file, rule: 'must be a PEM certificate file (-----BEGIN CERTIFICATE-----); none found' });
    return undefined;
  }
  try {
    return new X509Certificate(text);
  } catch (err) {
    problems.push({ key: 'certFile', value: file, rule: `must be a PEM certificate file; its certificate cannot be parsed (${reason(err)})` });
    return undefined;
  }
}

function readPrivateKey(file: string, problems: TlsProblem[]): KeyObject | undefined {
  const text = readText(file, 'keyFile', problems);
  if (text === undefined) return undefined;
  if (PEM_ENCRYPTED_KEY.test(text)) {
    problems.push({ key: 'keyFile', value: file, rule: 'must be an unencrypted PEM private key; this one is encrypted (decrypt it: openssl pkey -in KEY -out KEY.plain)' });
    return undefined;
  }
  if (!PEM_PRIVATE_KEY.test(text)) {
    problems.push({ key: 'keyFile', value: file, rule: 'must be a PEM private key file (-----BEGIN PRIVATE KEY-----); none found' });
    return undefined;
  }
  try {
    return createPrivateKey({ key: text, format: 'pem' });
  } catch (err) {
    problems.push({ key: 'keyFile', value: file, rule: `must be a PEM private key file; its key cannot be parsed (${reason(err)})` });
    return undefined;
  }
}

function matches(cert: X509Certificate, key: KeyObject): boolean {
  try {
    return cert.checkPrivateKey(key);
  } catch {
    return false;
  }
}

function reason(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0] ?? text;
}
