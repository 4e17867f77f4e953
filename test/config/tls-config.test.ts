// listen.tls files are checked when the config is loaded: a missing, unreadable, non-PEM,
// encrypted or mismatched certificate or key is a config problem naming the key and the file,
// reported by `check` and `serve` (exit 1) instead of uWS's "App construction failed".
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/config/load.js';
import { problemsOf } from '../helpers/config.js';
import { tlsWarnings } from '../../src/config/tls.js';
import { createLogger } from '../../src/log/logger.js';
import { startGateway } from '../../src/gateway/gateway.js';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { encryptKey, makeCertificate } from '../helpers/tls.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));

const a = makeCertificate('a');
const b = makeCertificate('b', a.dir);
after(a.remove);

function config(tls: Record<string, unknown>): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0, tls },
    services: [{ slug: 'svc', tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: ['http://127.0.0.1:9'] } }],
  };
}

/** Asserts exactly one problem, at `key`, naming `file`, with a rule matching `rule`. */
function assertOneProblem(tls: Record<string, unknown>, key: string, file: string, rule: RegExp): void {
  const problems = problemsOf(config(tls));
  assert.equal(problems.length, 1, problems.map((p) => `${p.key}: ${p.rule}`).join('\n'));
  assert.equal(problems[0]!.key, key);
  assert.equal(problems[0]!.value, file);
  assert.match(problems[0]!.rule, rule);
}

test('a valid certificate and its key pass', () => {
  const c = parseConfig(config({ certFile: a.certFile, keyFile: a.keyFile }));
  assert.deepEqual(c.listen.tls, { certFile: a.certFile, keyFile: a.keyFile });
});

test('a missing certificate file names listen.tls.certFile and the file', () => {
  const missing = join(a.dir, 'nope.crt');
  assertOneProblem({ certFile: missing, keyFile: a.keyFile }, 'listen.tls.certFile', missing, /^cannot be read \(ENOENT: no such file\)$/);
});

test('a missing key file names listen.tls.keyFile and the file', () => {
  const missing = join(a.dir, 'nope.key');
  assertOneProblem({ certFile: a.certFile, keyFile: missing }, 'listen.tls.keyFile', missing, /^cannot be read \(ENOENT/);
});

test('a directory is not a certificate', () => {
  const dir = join(a.dir, 'subdir');
  mkdirSync(dir, { recursive: true });
  assertOneProblem({ certFile: dir, keyFile: a.keyFile }, 'listen.tls.certFile', dir, /cannot be read \(EISDIR/);
});

test('files swapped: the key is not a certificate and the certificate is not a key', () => {
  const problems = problemsOf(config({ certFile: a.keyFile, keyFile: a.certFile }));
  assert.deepEqual(
    problems.map((p) => [p.key, p.value]),
    [
      ['listen.tls.certFile', a.keyFile],
      ['listen.tls.keyFile', a.certFile],
    ],
  );
  assert.match(problems[0]!.rule, /must be a PEM certificate file/);
  assert.match(problems[1]!.rule, /must be a PEM private key file/);
});

test('a PEM block that is not a certificate cannot be parsed', () => {
  const broken = join(a.dir, 'broken.crt');
  writeFileSync(broken, '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
  assertOneProblem({ certFile: broken, keyFile: a.keyFile }, 'listen.tls.certFile', broken, /its certificate cannot be parsed/);
});

test('a DER certificate is refused: uWS reads PEM only', () => {
  const der = join(a.dir, 'a.der');
  const body = a.cert.replace(/-----[^-]+-----|\s/g, '');
  writeFileSync(der, Buffer.from(body, 'base64'));
  assertOneProblem({ certFile: der, keyFile: a.keyFile }, 'listen.tls.certFile', der, /must be a PEM certificate file/);
});

test('an encrypted key is refused with how to decrypt it', () => {
  const encrypted = encryptKey(a.keyFile);
  assertOneProblem({ certFile: a.certFile, keyFile: encrypted }, 'listen.tls.keyFile', encrypted, /unencrypted.*openssl pkey/);
});

test('a key that does not belong to the certificate', () => {
  assertOneProblem({ certFile: a.certFile, keyFile: b.keyFile }, 'listen.tls.keyFile', b.keyFile, /must be the private key of the certificate in listen\.tls\.certFile/);
});

test('a certificate chain (leaf first) is accepted', () => {
  const chain = join(a.dir, 'chain.crt');
  writeFileSync(chain, a.cert + b.cert);
  parseConfig(config({ certFile: chain, keyFile: a.keyFile }));
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function sluice(args: string[]): Promise<Run> {
  const env = { ...process.env };
  for (const name of ['SLUICE_CONFIG', 'SLUICE_HOST', 'SLUICE_PORT', 'LOG_LEVEL']) delete env[name];
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, [CLI, ...args], { env, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') reject(err);
      else resolve({ code: child.exitCode, stdout, stderr });
    });
  });
}

for (const command of ['check', 'serve']) {
  test(`${command}: a certificate file that does not exist fails with the key and the file, exit 1`, async () => {
    const missing = join(a.dir, 'missing.crt');
    const file = join(a.dir, `${command}.json`);
    writeFileSync(file, JSON.stringify(config({ certFile: missing, keyFile: a.keyFile })));
    const run = await sluice([command, '--config', file]);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.doesNotMatch(run.stdout, /config OK/);
    const lines = run.stderr.trimEnd().split('\n');
    assert.equal(lines[0], `sluice: invalid config ${file}: 1 problem`);
    assert.equal(lines[1]?.trim(), `listen.tls.certFile: ${JSON.stringify(missing)} — cannot be read (ENOENT: no such file)`);
    assert.doesNotMatch(run.stderr, /App construction failed/);
  });
}

test('check: a valid certificate and key pass, with a warning when the certificate expires soon', async () => {
  const file = join(a.dir, 'good.json');
  writeFileSync(file, JSON.stringify(config({ certFile: a.certFile, keyFile: a.keyFile })));
  const run = await sluice(['check', '--config', file]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^config OK: 1 service$/m);
  // The throwaway certificate is valid for one day.
  assert.match(run.stdout, new RegExp(`^warning: listen\\.tls\\.certFile ${a.certFile.replace(/[.]/g, '\\.')}: the certificate expires on \\S+ \\(in 0 days\\)$`, 'm'));
});

test('certificate dates: expired, not valid yet, expiring soon, fine', () => {
  const tls = { certFile: a.certFile, keyFile: a.keyFile };
  const year = 365 * 86_400_000;
  assert.match(tlsWarnings(tls, Date.now() + year)[0] ?? '', /: the certificate expired on /);
  assert.match(tlsWarnings(tls, Date.now() - year)[0] ?? '', /: the certificate is not valid until /);
  assert.match(tlsWarnings(tls)[0] ?? '', /: the certificate expires on .* \(in 0 days\)$/);
  assert.deepEqual(tlsWarnings(tls, Date.now(), 0), []);
  assert.deepEqual(tlsWarnings({ certFile: join(a.dir, 'absent.crt'), keyFile: a.keyFile }), [], 'unreadable files are the loader’s to report');
});

test('files gone between the check and the start: startGateway names the keys and files', async () => {
  const dir = join(a.dir, 'vanishing');
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, 'c.crt');
  copyFileSync(a.certFile, certFile);
  const parsed = parseConfig(config({ certFile, keyFile: a.keyFile }));
  writeFileSync(certFile, 'replaced by something else\n');
  const logger = createLogger('silent');
  await assert.rejects(startGateway(parsed, { logger }), (err: Error) => {
    assert.match(err.message, /^cannot serve HTTPS with listen\.tls\.certFile \S+c\.crt and listen\.tls\.keyFile \S+a\.key: /);
    return true;
  });
});
