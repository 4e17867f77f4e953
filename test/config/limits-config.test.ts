// The config of limits per caller (docs/configuration.md#limits-per-caller): every problem named by
// key and rule, and `limits.store` refused by `sluice check` (and so by the start) until the redis
// store exists; rediss:// and limits.storeCaFile (TLS to the store).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/config/load.js';
import { parseRedisUrl, readStorePassword, shownRedisUrl, shownTarget } from '../../src/config/redis-store.js';
import { readStoreCa } from '../../src/config/store-tls.js';
import { problemsOf } from '../helpers/config.js';
import { makeCa } from '../helpers/tls.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const DIGEST = 'ab'.repeat(32);

function config(limits: unknown, top?: unknown): Record<string, unknown> {
  return {
    ...(top === undefined ? {} : { limits: top }),
    services: [{ slug: 'demo', tokens: [{ name: 'laptop', sha256: DIGEST, limits }], limits, replicas: { urls: ['http://127.0.0.1:9000'] } }],
  };
}

function rules(raw: unknown): Map<string, string> {
  return new Map(problemsOf(raw).map((p) => [p.key, p.rule]));
}

test('tokensPerDay and tokensPerMonth: integers from 1 to 1e9, on service, token and router limits, each problem named', () => {
  const ok = parseConfig(config({ tokensPerDay: 2_000_000, tokensPerMonth: 1_000_000_000 }));
  assert.deepEqual(ok.services[0]!.tokens[0]!.limits, { tokensPerDay: 2_000_000, tokensPerMonth: 1_000_000_000 });
  const bad = rules(config({ tokensPerDay: 0, tokensPerMonth: 1_000_000_001 }));
  assert.equal(bad.get('services[0].tokens[0].limits.tokensPerDay'), 'must be an integer from 1 to 1000000000 (LLM tokens per calendar day in UTC)');
  assert.equal(bad.get('services[0].limits.tokensPerMonth'), 'must be an integer from 1 to 1000000000 (LLM tokens per calendar month in UTC)');
  assert.match(rules(config({ tokensPerDay: '5e3x' })).get('services[0].tokens[0].limits.tokensPerDay')!, /^must be an integer from 1 to 1000000000/);
  const routed = parseConfig({
    services: [{ slug: 'm', tokens: [{ name: 'a', sha256: DIGEST }], models: ['m'], replicas: { urls: ['http://127.0.0.1:9000'] } }],
    routers: [{ slug: 'r', tokens: [{ name: 'team', sha256: DIGEST, limits: { tokensPerDay: 1000 } }], limits: { tokensPerMonth: 9000 } }],
  });
  assert.deepEqual(routed.routers![0]!.tokens[0]!.limits, { tokensPerDay: 1000 });
  assert.deepEqual(routed.routers![0]!.limits, { tokensPerMonth: 9000 });
});

test('limits: every key optional, each an integer in its range; unknown keys named', () => {
  const ok = parseConfig(config({ requestsPerMinute: 60, concurrent: 4, tokensPerMinute: 100_000 }));
  assert.deepEqual(ok.services[0]!.tokens[0]!.limits, { requestsPerMinute: 60, concurrent: 4, tokensPerMinute: 100_000 });
  assert.deepEqual(parseConfig(config({})).services[0]!.limits, {});
  assert.deepEqual(ok.limits, { prefix: 'sluice:', onStoreDown: 'allow' });

  const bad = rules(config({ requestsPerMinute: 0, concurrent: 1.5, tokensPerMinute: '100', perHour: 3 }));
  assert.match(bad.get('services[0].tokens[0].limits.requestsPerMinute')!, /^must be an integer from 1 to 1000000/);
  assert.match(bad.get('services[0].tokens[0].limits.concurrent')!, /^must be an integer from 1 to 1000000/);
  assert.match(bad.get('services[0].tokens[0].limits.tokensPerMinute')!, /^must be an integer from 1 to 1000000000/);
  assert.match(bad.get('services[0].tokens[0].limits.perHour')!, /^unknown key/);
  assert.match(bad.get('services[0].limits.requestsPerMinute')!, /^must be an integer/);
  assert.match(rules(config(5)).get('services[0].limits')!, /^must be an object with any of requestsPerMinute, concurrent, tokensPerMinute/);
});

test('top-level limits: store must be a redis URL, prefix visible ASCII, onStoreDown allow or refuse', () => {
  const bad = rules(config(undefined, { store: 'http://x:1', prefix: '', onStoreDown: 'maybe' }));
  assert.match(bad.get('limits.store')!, /^must be redis:\/\/host:port or redis:\/\/host:port\/db/);
  assert.match(bad.get('limits.prefix')!, /^must be 1 to 64 visible ASCII characters/);
  assert.equal(bad.get('limits.onStoreDown'), 'must be allow or refuse');
  assert.match(rules(config(undefined, { store: 'redis://cache:0' })).get('limits.store')!, /^must be redis:/);
  assert.deepEqual(parseConfig(config(undefined, { prefix: 'gw1:', onStoreDown: 'refuse' })).limits, { prefix: 'gw1:', onStoreDown: 'refuse' });
});

test('a redis store is accepted: host:port with an optional db', () => {
  assert.deepEqual(parseConfig(config(undefined, { store: 'redis://cache:6379/2' })).limits, { store: 'redis://cache:6379/2', prefix: 'sluice:', onStoreDown: 'allow' });
  assert.equal(parseConfig(config(undefined, { store: 'redis://10.0.0.7:6380' })).limits.store, 'redis://10.0.0.7:6380');
  for (const url of ['redis://cache', 'redis://cache:6379/x', 'redis://cache:70000', 'redis://cache:6379/2?x=1', 'rediss://cache', 'redis:/cache:6379', 'redisss://cache:6379', 'redis://cache:6379/']) {
    assert.match(rules(config(undefined, { store: url })).get('limits.store') ?? 'accepted', /^must be redis:\/\/host:port or redis:\/\/host:port\/db/, url);
  }
});

async function check(file: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'check', '--config', file], (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : Number((err as { code?: number }).code), out: stdout + stderr });
    });
  });
}

test('sluice check: a redis store passes; a malformed one fails with its key and rule, exit 1', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-limits-'));
  try {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'redis://127.0.0.1:6379/1' })));
    const good = await check(file);
    assert.equal(good.code, 0, good.out);
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'redis://127.0.0.1' })));
    const bad = await check(file);
    assert.equal(bad.code, 1);
    assert.match(bad.out, /limits\.store/);
    assert.match(bad.out, /must be redis:\/\/host:port or redis:\/\/host:port\/db \(db an integer from 0 to 65535\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a redis store with a password: [username]:password@, percent-decoded', () => {
  assert.deepEqual(parseRedisUrl('redis://:pw@cache:6379'), { host: 'cache', port: 6379, db: 0, password: 'pw' });
  assert.deepEqual(parseRedisUrl('redis://sluice:p%40ss%3Aw%2Fd%25@cache:6379/3'), { host: 'cache', port: 6379, db: 3, username: 'sluice', password: 'p@ss:w/d%' });
  // After the first ':', a ':' is the password's; a username may be percent-encoded too.
  assert.deepEqual(parseRedisUrl('redis://us%C3%A9r:a:b@10.0.0.7:6380'), { host: '10.0.0.7', port: 6380, db: 0, username: 'usér', password: 'a:b' });
  assert.deepEqual(parseRedisUrl('redis://sluice@cache:6379'), { host: 'cache', port: 6379, db: 0, username: 'sluice' });
  assert.equal(parseConfig(config(undefined, { store: 'redis://sluice:pw@cache:6379/1' })).limits.store, 'redis://sluice:pw@cache:6379/1');
});

test('a malformed user info is refused with its rule, and the problem never shows the password', () => {
  const cases: [string, RegExp][] = [
    ['redis://sluice:pw-secret-1@x@cache:6379', /user info must be percent-encoded \(@ as %40/],
    ['redis://sluice:pw-secret-1%zz@cache:6379', /% not followed by two hex digits/],
    ['redis://sluice:@cache:6379', /the password after ':' is empty/],
    ['redis://@cache:6379', /'@' without a username or password/],
    ['redis://sluice:pw-secret-1@cache:6379/x', /^must be redis:\/\/host:port or redis:\/\/host:port\/db \(db an integer from 0 to 65535\), with \[username\]:password@/],
    ['redis://sluice@cache:6379', /has a username without a password: give it as redis:\/\/username:password@host:port, or in limits.storePasswordFile/],
  ];
  for (const [url, rule] of cases) {
    const p = problemsOf(config(undefined, { store: url })).find((x) => x.key === 'limits.store');
    assert.ok(p !== undefined, url);
    assert.match(p.rule, rule, url);
    assert.ok(!String(p.value).includes('pw-secret-1'), `${url} shown as ${String(p.value)}`);
  }
  assert.equal(shownRedisUrl('redis://sluice:pw-secret-1@x@cache:6379'), 'redis://sluice:***@cache:6379');
  assert.equal(shownRedisUrl('redis://cache:6379/0'), 'redis://cache:6379/0');
});

test('a store URL without a port is refused for its port, not for its user info', () => {
  for (const url of ['redis://:pw-secret-1@localhost', 'redis://sluice:pw-secret-1@localhost/2', 'rediss://:pw-secret-1@cache.example']) {
    const p = problemsOf(config(undefined, { store: url })).find((x) => x.key === 'limits.store')!;
    assert.match(p.rule, /^must be redis:\/\/host:port .*; the port is missing \(Redis's own is 6379: host:6379\)$/, url);
    assert.doesNotMatch(p.rule, /user info must be percent-encoded/, url);
    assert.ok(!String(p.value).includes('pw-secret-1'), `${url} shown as ${String(p.value)}`);
  }
  assert.match(problemsOf(config(undefined, { store: 'redis://localhost' })).find((x) => x.key === 'limits.store')!.rule, /the port is missing/);
});

test('a username without a password is shown as a username: nothing is masked as a password', () => {
  assert.equal(shownRedisUrl('redis://sluice@cache:6379'), 'redis://sluice@cache:6379');
  assert.equal(shownRedisUrl('rediss://us%C3%A9r@cache:6379/1'), 'rediss://us%C3%A9r@cache:6379/1');
  const p = problemsOf(config(undefined, { store: 'redis://sluice@cache:6379' })).find((x) => x.key === 'limits.store')!;
  assert.equal(p.value, 'redis://sluice@cache:6379');
  assert.match(p.rule, /has a username without a password/);
  // User info that is not a clean username (unencoded '@') is not shown, and not called a password.
  assert.equal(shownRedisUrl('redis://pw@secret@cache:6379'), 'redis://***@cache:6379');
});

test('limits.storePasswordFile: read when the config is; missing, empty, beside a URL password or without a store: named with its rule', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-store-pw-'));
  try {
    const file = join(dir, 'pw');
    writeFileSync(file, 'pw-secret-2\n');
    const ok = parseConfig(config(undefined, { store: 'redis://sluice@cache:6379', storePasswordFile: file }));
    assert.deepEqual(ok.limits, { store: 'redis://sluice@cache:6379', storePasswordFile: file, prefix: 'sluice:', onStoreDown: 'allow' });
    assert.equal(parseConfig(config(undefined, { store: 'redis://cache:6379', storePasswordFile: file })).limits.storePasswordFile, file, 'the default user');
    const rule = (top: Record<string, unknown>): string | undefined => rules(config(undefined, top)).get('limits.storePasswordFile');
    assert.equal(rule({ store: 'redis://cache:6379', storePasswordFile: join(dir, 'missing') }), 'cannot be read (ENOENT: no such file)');
    assert.equal(rule({ store: 'redis://cache:6379', storePasswordFile: dir }), 'cannot be read (EISDIR: is a directory)');
    writeFileSync(join(dir, 'empty'), '\n');
    assert.equal(rule({ store: 'redis://cache:6379', storePasswordFile: join(dir, 'empty') }), 'must hold the password; the file is empty');
    assert.equal(rule({ store: 'redis://sluice:pw@cache:6379', storePasswordFile: file }), 'must not be set when limits.store has a password: keep the password in one place');
    assert.equal(rule({ storePasswordFile: file }), 'must be set only with limits.store');
    assert.equal(rule({ store: 'redis://cache:6379', storePasswordFile: '' }), 'must be a non-empty file path');
    for (const p of problemsOf(config(undefined, { store: 'redis://sluice:pw@cache:6379', storePasswordFile: file }))) assert.ok(!JSON.stringify(p).includes('pw-secret-2'));
    // One trailing newline is not part of the password; the rest is.
    assert.equal(readStorePassword(file), 'pw-secret-2');
    writeFileSync(file, ' pw \r\n');
    assert.equal(readStorePassword(file), ' pw ');
    writeFileSync(file, 'pw\n\n');
    assert.equal(readStorePassword(file), 'pw\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('sluice check: a store password is never printed, whatever is wrong with the URL', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-limits-'));
  try {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'redis://sluice:pw-secret-3@127.0.0.1:6379/1' })));
    const good = await check(file);
    assert.equal(good.code, 0, good.out);
    assert.ok(!good.out.includes('pw-secret-3'));
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'redis://sluice:pw-secret-3@127.0.0.1' })));
    const bad = await check(file);
    assert.equal(bad.code, 1);
    assert.match(bad.out, /limits\.store: "redis:\/\/sluice:\*\*\*@127\.0\.0\.1" — must be redis:/);
    assert.ok(!bad.out.includes('pw-secret-3'), bad.out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an unknown key named like a secret (limits.storePassword) is named without echoing its value', () => {
  const problems = problemsOf(config(undefined, { store: 'redis://cache:6379', storePassword: 'pw-secret-4', prefx: 'x:' }));
  const byKey = new Map(problems.map((p) => [p.key, p]));
  assert.match(byKey.get('limits.storePassword')?.rule ?? '', /^unknown key/);
  assert.equal(byKey.get('limits.storePassword')?.value, '[redacted]');
  assert.equal(byKey.get('limits.prefx')?.value, 'x:', 'other unknown keys show what was there');
  assert.ok(!JSON.stringify(problems).includes('pw-secret-4'));
});

test('rediss://: the same grammar over TLS, accepted and shown with its scheme, the password as ***', () => {
  assert.deepEqual(parseRedisUrl('rediss://cache.example.com:6380'), { host: 'cache.example.com', port: 6380, db: 0, tls: true });
  assert.deepEqual(parseRedisUrl('rediss://sluice:p%40ss@cache:6379/2'), { host: 'cache', port: 6379, db: 2, username: 'sluice', password: 'p@ss', tls: true });
  assert.equal(parseConfig(config(undefined, { store: 'rediss://:pw@cache:6379/1' })).limits.store, 'rediss://:pw@cache:6379/1');
  assert.equal(shownRedisUrl('rediss://sluice:pw-secret-5@cache:6379'), 'rediss://sluice:***@cache:6379');
  assert.equal(shownTarget({ host: 'cache', port: 6379, db: 0, username: 'sluice', password: 'pw-secret-5', tls: true }, true), 'rediss://sluice:***@cache:6379/0');
  assert.equal(shownTarget({ host: 'cache', port: 6379, db: 3, tls: true }, false), 'rediss://cache:6379/3');
  // A malformed rediss:// URL: the rule, the password never shown.
  const p = problemsOf(config(undefined, { store: 'rediss://sluice:pw-secret-5@x@cache:6379' })).find((x) => x.key === 'limits.store')!;
  assert.match(p.rule, /, or the same with rediss:\/\/ for TLS; its user info must be percent-encoded/);
  assert.equal(p.value, 'rediss://sluice:***@cache:6379');
});

test('limits.storeCaFile: read when the config is; only with rediss://; a missing file or one without a certificate named with its rule', () => {
  const ca = makeCa('config-ca');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-store-ca-'));
  try {
    const ok = parseConfig(config(undefined, { store: 'rediss://cache:6379', storeCaFile: ca.certFile }));
    assert.deepEqual(ok.limits, { store: 'rediss://cache:6379', storeCaFile: ca.certFile, prefix: 'sluice:', onStoreDown: 'allow' });
    assert.deepEqual(readStoreCa(ca.certFile), [ca.cert.trim()]);
    const bundle = join(dir, 'bundle.pem');
    writeFileSync(bundle, `# two CAs\n${ca.cert}\n${ca.cert}`);
    assert.equal(readStoreCa(bundle).length, 2);
    const rule = (top: Record<string, unknown>): string | undefined => rules(config(undefined, top)).get('limits.storeCaFile');
    assert.equal(parseConfig(config(undefined, { store: 'rediss://cache:6379', storeCaFile: bundle })).limits.storeCaFile, bundle);
    assert.equal(rule({ store: 'redis://cache:6379', storeCaFile: ca.certFile }), 'must be set only with a rediss:// limits.store (TLS)');
    assert.equal(rule({ storeCaFile: ca.certFile }), 'must be set only with a rediss:// limits.store (TLS)');
    assert.equal(rule({ store: 'rediss://cache:6379', storeCaFile: join(dir, 'missing.pem') }), 'cannot be read (ENOENT: no such file)');
    writeFileSync(join(dir, 'empty.pem'), '');
    assert.equal(rule({ store: 'rediss://cache:6379', storeCaFile: join(dir, 'empty.pem') }), 'must hold one or more PEM certificates (-----BEGIN CERTIFICATE-----); none found');
    // A key is not a certificate.
    assert.equal(rule({ store: 'rediss://cache:6379', storeCaFile: ca.keyFile }), 'must hold one or more PEM certificates (-----BEGIN CERTIFICATE-----); none found');
    writeFileSync(join(dir, 'broken.pem'), '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    assert.match(rule({ store: 'rediss://cache:6379', storeCaFile: join(dir, 'broken.pem') }) ?? '', /^must hold PEM certificates; certificate 1 cannot be parsed \(/);
    assert.equal(rule({ store: 'rediss://cache:6379', storeCaFile: '' }), 'must be a non-empty file path');
    // The problem names the file.
    const p = problemsOf(config(undefined, { store: 'rediss://cache:6379', storeCaFile: join(dir, 'missing.pem') })).find((x) => x.key === 'limits.storeCaFile');
    assert.equal(p?.value, join(dir, 'missing.pem'));
  } finally {
    ca.remove();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('sluice check: a rediss:// store with a CA file passes; a missing CA file fails naming the key and the file, exit 1', async () => {
  const ca = makeCa('check-ca');
  try {
    const file = join(ca.dir, 'config.json');
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'rediss://sluice:pw-secret-6@127.0.0.1:6379/1', storeCaFile: ca.certFile })));
    const good = await check(file);
    assert.equal(good.code, 0, good.out);
    const missing = join(ca.dir, 'gone.pem');
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'rediss://sluice:pw-secret-6@127.0.0.1:6379/1', storeCaFile: missing })));
    const bad = await check(file);
    assert.equal(bad.code, 1);
    assert.ok(bad.out.includes(`limits.storeCaFile: ${JSON.stringify(missing)} — cannot be read (ENOENT: no such file)`), bad.out);
    assert.ok(!good.out.includes('pw-secret-6') && !bad.out.includes('pw-secret-6'), 'the password printed');
  } finally {
    ca.remove();
  }
});

test('limits.storeCertFile and storeKeyFile: both or neither, only with rediss://, the key of that certificate', () => {
  const ca = makeCa('client-ca');
  try {
    const client = ca.issue('client');
    const other = ca.issue('other');
    const tls = { store: 'rediss://cache:6379', storeCertFile: client.certFile, storeKeyFile: client.keyFile };
    assert.deepEqual(parseConfig(config(undefined, tls)).limits, { ...tls, prefix: 'sluice:', onStoreDown: 'allow' });
    const problems = (top: Record<string, unknown>): Record<string, string> => Object.fromEntries([...rules(config(undefined, top))].filter(([k]) => k.startsWith('limits.store')));
    assert.deepEqual(problems({ ...tls, store: 'redis://cache:6379' }), {
      'limits.storeCertFile': 'must be set only with a rediss:// limits.store (TLS)',
      'limits.storeKeyFile': 'must be set only with a rediss:// limits.store (TLS)',
    });
    assert.deepEqual(problems({ store: 'rediss://cache:6379', storeCertFile: client.certFile }), { 'limits.storeKeyFile': 'must be set with limits.storeCertFile: the private key of the client certificate' });
    assert.deepEqual(problems({ store: 'rediss://cache:6379', storeKeyFile: client.keyFile }), { 'limits.storeCertFile': 'must be set with limits.storeKeyFile: the client certificate of that key' });
    assert.deepEqual(problems({ ...tls, storeKeyFile: other.keyFile }), { 'limits.storeKeyFile': `must be the private key of the certificate in limits.storeCertFile (${client.certFile}); it is another key` });
    assert.deepEqual(problems({ ...tls, storeCertFile: join(ca.dir, 'gone.crt') }), { 'limits.storeCertFile': 'cannot be read (ENOENT: no such file)' });
    assert.deepEqual(problems({ ...tls, storeCertFile: client.keyFile }), { 'limits.storeCertFile': 'must be a PEM certificate file (-----BEGIN CERTIFICATE-----); none found' });
  } finally {
    ca.remove();
  }
});
