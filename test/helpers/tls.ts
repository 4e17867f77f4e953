// Throwaway TLS material for tests, made with the `openssl` command: a self-signed certificate
// for `localhost` and 127.0.0.1 (P-256, valid one day) and its key, in a temporary directory; a
// CA and the certificates it signs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificate {
  /** The temporary directory holding the files (remove it with `remove()`). */
  dir: string;
  certFile: string;
  keyFile: string;
  /** The certificate's PEM text: a client trusts the gateway by passing it as `ca`. */
  cert: string;
  remove(): void;
}

/** A new self-signed certificate and key in `dir` (a new temporary directory by default). */
export function makeCertificate(name = 'server', dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'))): TestCertificate {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  // prettier-ignore
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', `/CN=${name}`,
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { dir, certFile, keyFile, cert: readFileSync(certFile, 'utf8'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `keyFile` encrypted with a passphrase, written next to it as `<name>.enc.key`. */
export function encryptKey(keyFile: string): string {
  const out = keyFile.replace(/\.key$/, '.enc.key');
  execFileSync('openssl', ['pkey', '-in', keyFile, '-aes256', '-passout', 'pass:secret', '-out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  return out;
}

/** A throwaway certificate authority: its certificate (`certFile`, `cert`) signs others with `issue`. */
export interface TestCa extends TestCertificate {
  /** A new certificate for `name` signed by this CA (P-256, valid `days`: one by default), its SAN `altNames` (`DNS:localhost,IP:127.0.0.1` by default), in the CA's directory. */
  issue(name: string, altNames?: string, days?: number): { certFile: string; keyFile: string };
}

/** A new CA (a self-signed certificate with `basicConstraints CA:TRUE`, valid `days`) and its key. */
export function makeCa(name = 'ca', dir = mkdtempSync(join(tmpdir(), 'sluice-ca-')), days = 1): TestCa {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  // prettier-ignore
  openssl([
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', String(days), '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const issue = (leaf: string, altNames = 'DNS:localhost,IP:127.0.0.1', leafDays = 1): { certFile: string; keyFile: string } => {
    const leafCert = join(dir, `${leaf}.crt`);
    const leafKey = join(dir, `${leaf}.key`);
    const csr = join(dir, `${leaf}.csr`);
    const ext = join(dir, `${leaf}.ext`);
    writeFileSync(ext, `subjectAltName=${altNames}\nbasicConstraints=CA:FALSE\n`);
    openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', leafKey, '-out', csr, '-subj', `/CN=${leaf}`]);
    openssl(['x509', '-req', '-in', csr, '-CA', certFile, '-CAkey', keyFile, '-CAcreateserial', '-out', leafCert, '-days', String(leafDays), '-extfile', ext]);
    return { certFile: leafCert, keyFile: leafKey };
  };
  return { dir, certFile, keyFile, cert: readFileSync(certFile, 'utf8'), issue, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}
