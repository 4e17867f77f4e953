// The certificates the gateway serves and trusts, as they come to their end: every certificate of
// a file is looked at (a chain's intermediate, a CA bundle's each), `check` and the running gateway
// warn about them, and the metric says when each file in use ends, for the listener's and the
// limit store's, through a SIGHUP that renews the store's.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { expiryWarnings, readCertificateDates } from '../../src/config/certificate-expiry.js';
import { parseConfig } from '../../src/config/load.js';
import { tlsWarnings } from '../../src/config/tls.js';
import { CertificateWatch } from '../../src/gateway/certificate-watch.js';
import { createLogger } from '../../src/log/logger.js';
import { logged, metricSamples, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closedPort } from '../helpers/replica.js';
import { makeCa, makeCertificate } from '../helpers/tls.js';
import { eventually } from '../helpers/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'sluice-expiry-'));
const cleanups: (() => unknown)[] = [() => rmSync(dir, { recursive: true, force: true })];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const YEAR_MS = 365 * 86_400_000;

/** The end of the (first) certificate of `file` as openssl reads it, in seconds since the epoch. */
function opensslEnd(file: string): number {
  const out = execFileSync('openssl', ['x509', '-in', file, '-noout', '-enddate'], { encoding: 'utf8' });
  return Date.parse(out.trim().replace(/^notAfter=/, '')) / 1000;
}

test('a chain: the intermediate that ends first is warned about by its place and subject, the leaf that lasts is not', () => {
  const ca = makeCa('short-intermediate', mkdtempSync(join(dir, 'chain-')));
  cleanups.push(() => ca.remove());
  const leaf = ca.issue('long-leaf', undefined, 365);
  const chain = join(ca.dir, 'chain.crt');
  writeFileSync(chain, readFileSync(leaf.certFile, 'latin1') + readFileSync(ca.certFile, 'latin1'));
  const warnings = tlsWarnings({ certFile: chain, keyFile: leaf.keyFile });
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, new RegExp(`^listen\\.tls\\.certFile ${chain.replace(/[.]/g, '\\.')}: certificate 2 \\(CN=short-intermediate\\) expires on \\S+ \\(in 0 days\\)$`));
  // A year on, both have ended; a year before, neither has begun.
  assert.deepEqual(
    tlsWarnings({ certFile: chain, keyFile: leaf.keyFile }, Date.now() + 2 * YEAR_MS).map((w) => w.replace(/ on \S+$/, '')),
    [`listen.tls.certFile ${chain}: certificate 1 (CN=long-leaf) expired`, `listen.tls.certFile ${chain}: certificate 2 (CN=short-intermediate) expired`],
  );
  assert.equal(tlsWarnings({ certFile: chain, keyFile: leaf.keyFile }, Date.now() - YEAR_MS).filter((w) => w.includes(' is not valid until ')).length, 2);
});

test('a CA bundle: only the CA that ends soon is warned about', () => {
  const lasting = makeCa('lasting-ca', mkdtempSync(join(dir, 'bundle-')), 3650);
  const ending = makeCa('ending-ca', mkdtempSync(join(dir, 'bundle-')));
  cleanups.push(() => lasting.remove(), () => ending.remove());
  const bundle = join(dir, 'bundle.crt');
  writeFileSync(bundle, lasting.cert + ending.cert);
  const dates = readCertificateDates(bundle);
  assert.equal(dates.length, 2);
  assert.deepEqual(
    expiryWarnings(`limits.storeCaFile ${bundle}`, dates).map((w) => w.replace(/ on \S+ /, ' on … ')),
    [`limits.storeCaFile ${bundle}: certificate 2 (CN=ending-ca) expires on … (in 0 days)`],
  );
  assert.deepEqual(expiryWarnings(`limits.storeCaFile ${bundle}`, dates, Date.now(), 0), [], 'nothing within zero days');
});

test('the watch warns when a certificate comes into use and again at each look, until it is closed', async () => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const cert = makeCertificate('watched', mkdtempSync(join(dir, 'watch-')));
  cleanups.push(() => cert.remove());
  // A look every 20 ms stands in for the day between two.
  const watch = new CertificateWatch(createLogger('info', sink), 20);
  const warnings = (): Record<string, unknown>[] => logged({ logs: lines }, 'TLS certificate warning');
  watch.inUseFile('listen', cert.certFile);
  assert.equal(warnings().length, 1, 'warned as it came into use');
  assert.equal(warnings()[0]!.certificate, 'listen');
  assert.equal(warnings()[0]!.file, cert.certFile);
  await eventually(() => warnings().length >= 3, 10_000, 'two more looks');
  watch.close();
  const seen = warnings().length;
  // Closed: by the time a second watch on the same timing has looked three times, the first would have.
  const witness = new CertificateWatch(createLogger('info', sink), 20);
  witness.inUseFile('limit_store_ca', cert.certFile);
  await eventually(() => warnings().filter((l) => l.certificate === 'limit_store_ca').length >= 4, 10_000, "the witness's three looks");
  witness.close();
  assert.equal(warnings().filter((l) => l.certificate === 'listen').length, seen, 'no look after close');
  assert.deepEqual(watch.readings(), [{ certificate: 'listen', notAfter: opensslEnd(cert.certFile) * 1000 }]);
});

/** A gateway serving TLS with a limit store over TLS that is not there (the certificates are read all the same). */
async function gatewayWithCertificates(files: { listen: { certFile: string; keyFile: string }; ca: string; cert: string; key: string }): Promise<{ tg: TestGateway; config: ReturnType<typeof parseConfig> }> {
  const limits = { store: `rediss://127.0.0.1:${await closedPort()}`, storeCaFile: files.ca, storeCertFile: files.cert, storeKeyFile: files.key };
  const service = rawService({ urls: ['http://127.0.0.1:1'] }, { limits: { requestsPerMinute: 10 } });
  const extra = { listen: { host: '127.0.0.1', port: 0, tls: files.listen }, admin: { host: '127.0.0.1', port: 0 }, limits };
  const tg = await startTestGateway(service, extra);
  cleanups.push(() => tg.close());
  return { tg, config: parseConfig({ log: { level: 'info' }, services: [service], ...extra }) };
}

async function expiries(tg: TestGateway): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/metrics`)).text();
  const found: Record<string, number> = {};
  for (const [sample, value] of metricSamples(text)) {
    const m = /^sluice_tls_certificate_expiry_timestamp_seconds\{certificate="(\w+)"\}$/.exec(sample);
    if (m !== null) found[m[1]!] = value;
  }
  return found;
}

test('a running gateway: warnings for what ends within 14 days, the metric for each certificate in use, a renewed store CA and client certificate after SIGHUP', async () => {
  const listen = makeCertificate('listener', mkdtempSync(join(dir, 'gw-')));
  const ca = makeCa('store-ca', mkdtempSync(join(dir, 'gw-')));
  cleanups.push(() => listen.remove(), () => ca.remove());
  const client = ca.issue('store-client', undefined, 30);
  const caFile = join(ca.dir, 'in-use-ca.crt');
  const certFile = join(ca.dir, 'in-use-client.crt');
  const keyFile = join(ca.dir, 'in-use-client.key');
  copyFileSync(ca.certFile, caFile);
  copyFileSync(client.certFile, certFile);
  copyFileSync(client.keyFile, keyFile);
  const { tg, config } = await gatewayWithCertificates({ listen: { certFile: listen.certFile, keyFile: listen.keyFile }, ca: caFile, cert: certFile, key: keyFile });

  const warned = (): Record<string, unknown>[] => logged(tg, 'TLS certificate warning');
  // The listener's and the CA's end in a day; the client certificate's in 30.
  assert.deepEqual(warned().map((l) => [l.certificate, l.file]).sort(), [['limit_store_ca', caFile], ['listen', listen.certFile]]);
  assert.match(String(warned().find((l) => l.certificate === 'listen')!.warning), /^listen\.tls\.certFile \S+: the certificate expires on \S+ \(in 0 days\)$/);
  assert.deepEqual(await expiries(tg), { listen: opensslEnd(listen.certFile), limit_store_ca: opensslEnd(caFile), limit_store_client: opensslEnd(certFile) });

  // Renewed: a CA for ten years, and a client certificate that (by mistake) lasts one day.
  const renewed = makeCa('store-ca-renewed', mkdtempSync(join(dir, 'gw-')), 3650);
  cleanups.push(() => renewed.remove());
  const shortClient = renewed.issue('store-client-short');
  copyFileSync(renewed.certFile, caFile);
  copyFileSync(shortClient.certFile, certFile);
  copyFileSync(shortClient.keyFile, keyFile);
  const before = warned().length;
  tg.gateway.reload(config);
  await eventually(() => tg.logs.some((l) => l.msg === 'limit store client certificate reloaded'), 10_000, 'the reload');
  const after = warned().slice(before);
  assert.deepEqual(after.map((l) => [l.certificate, l.file]), [['limit_store_client', certFile]], 'the short client certificate, and not the renewed CA');
  assert.deepEqual(await expiries(tg), { listen: opensslEnd(listen.certFile), limit_store_ca: opensslEnd(renewed.certFile), limit_store_client: opensslEnd(shortClient.certFile) });
});

test('check: the limit store CA and client certificate that end soon are warned about', async () => {
  const ca = makeCa('check-ca', mkdtempSync(join(dir, 'check-')));
  cleanups.push(() => ca.remove());
  const client = ca.issue('check-client');
  const file = join(ca.dir, 'sluice.json');
  const service = rawService({ urls: ['http://127.0.0.1:1'] }, { limits: { requestsPerMinute: 10 } });
  writeFileSync(file, JSON.stringify({ services: [service], limits: { store: 'rediss://127.0.0.1:6380', storeCaFile: ca.certFile, storeCertFile: client.certFile, storeKeyFile: client.keyFile } }));
  const out = execFileSync(process.execPath, [new URL('../../src/cli.js', import.meta.url).pathname, 'check', '--config', file], { encoding: 'utf8' });
  const lines = out.trimEnd().split('\n');
  assert.equal(lines[0], 'config OK: 1 service');
  assert.deepEqual(
    lines.slice(1).map((l) => l.replace(/ on \S+ /, ' on … ')),
    [`warning: limits.storeCaFile ${ca.certFile}: the certificate expires on … (in 0 days)`, `warning: limits.storeCertFile ${client.certFile}: the certificate expires on … (in 0 days)`],
  );
});
