// The shared store over TLS (`limits.store: rediss://…`, docs/configuration.md#sharing-limits-across-gateways,
// docs/operations.md#running-the-limit-store), black-box: a real redis-server speaking TLS only
// (test/helpers/redis.ts), its certificate signed by a throwaway CA (test/helpers/tls.ts), with a
// password; real gateways on port 0, a real replica. Two gateways share a limit through it, trusting
// the CA by limits.storeCaFile; a CA that did not sign the store's certificate, a certificate for
// another name, or a handshake the server refuses (it wants a client certificate) is an outage
// (onStoreDown) logged once with its code and counted; a corrected CA file and SIGHUP (sluice
// serve) end it; a client certificate (storeCertFile, storeKeyFile) satisfies a Redis with
// tls-auth-clients yes, and is read again on reload; no log holds the password.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Agent } from 'undici';
import { parseConfig } from '../../src/config/load.js';
import { AUTH, logged, metric, rawService, secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { STORE_COMMANDS, storeAnswer, storeDecided } from '../helpers/limit-store.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { makeCa, type TestCa } from '../helpers/tls.js';
import { eventually } from '../helpers/wait.js';
import { type CliGateway, startCliGateway } from '../helpers/workers.js';

const PASSWORD = secret('tls-store-s3cret/pw@1');
const ENCODED = secret(encodeURIComponent(PASSWORD));
const ADMIN_PASSWORD = secret('tls-default-users-password-9');

let redis: TestRedis;
let ca: TestCa;
let otherCa: TestCa;
let replica: TestReplica;
let dir: string;
let cli: CliGateway | undefined;
const gateways: TestGateway[] = [];
const agent = new Agent({ connections: 16, headersTimeout: 20_000 });

const status = (tg: TestGateway): ReturnType<typeof storeAnswer> => storeAnswer(tg, agent);
const decided = (tg: TestGateway): Promise<number> => storeDecided(tg, agent);

async function gateway(limits: Record<string, unknown>, top: Record<string, unknown>): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { limits: { onStoreDown: 'refuse', ...top } });
  gateways.push(tg);
  return tg;
}

function assertNoPassword(text: string): void {
  for (const p of [PASSWORD, ENCODED, ADMIN_PASSWORD]) assert.ok(!text.includes(p), 'a password in the log');
}

describe('limits.store over TLS (rediss://)', { skip: REDIS_SKIP }, () => {
  before(async () => {
    ca = makeCa('store-ca');
    otherCa = makeCa('other-ca');
    const server = ca.issue('redis');
    redis = await startRedis({ password: ADMIN_PASSWORD, users: [`sluice on >${PASSWORD} ~tls* ${STORE_COMMANDS}`] }, { ...server, caFile: ca.certFile });
    dir = mkdtempSync(join(tmpdir(), 'sluice-store-tls-'));
    replica = await startReplica(async (req: IncomingMessage, res: ServerResponse) => {
      await readBody(req);
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
  });

  after(async () => {
    if (cli !== undefined && cli.child.exitCode === null) cli.child.kill('SIGKILL');
    for (const tg of gateways) await tg.close();
    await agent.close();
    await replica?.close();
    await redis?.close();
    ca?.remove();
    otherCa?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test('two gateways share requestsPerMinute through a TLS Redis whose CA storeCaFile trusts, with a password in the URL at one, in a file at the other', async () => {
    const passwordFile = join(dir, 'pw');
    writeFileSync(passwordFile, `${PASSWORD}\n`);
    const a = await gateway({ requestsPerMinute: 2 }, { store: `rediss://sluice:${ENCODED}@127.0.0.1:${redis.port}`, storeCaFile: ca.certFile, prefix: 'tls1:' });
    const b = await gateway({ requestsPerMinute: 2 }, { store: `rediss://sluice@127.0.0.1:${redis.port}/0`, storePasswordFile: passwordFile, storeCaFile: ca.certFile, prefix: 'tls1:' });
    for (const tg of [a, b]) await eventually(() => logged(tg, 'limit store reachable').length === 1, 10_000, 'the gateways to reach the store');
    // Two of the four in all, whichever gateway admits them.
    const answers = [await decided(a), await decided(b), await decided(a), await decided(b)];
    assert.deepEqual(answers.slice().sort(), [200, 200, 429, 429], answers.join(' '));
    assert.equal(answers[0], 200);
    for (const tg of [a, b]) {
      assert.equal(logged(tg, 'limit store reachable')[0]!.store, `rediss://sluice:***@127.0.0.1:${redis.port}/0`);
      assert.equal(logged(tg, 'limit store TLS failed').length, 0);
      assertNoPassword(tg.logText());
    }
  });

  test('a CA that did not sign the store’s certificate, onStoreDown refuse: 503 limits_unavailable, the failure counted and logged once with its code', async () => {
    const tg = await gateway({ requestsPerMinute: 100 }, { store: `rediss://sluice:${ENCODED}@127.0.0.1:${redis.port}`, storeCaFile: otherCa.certFile, prefix: 'tls2:' });
    await eventually(() => logged(tg, 'limit store TLS failed').length === 1, 10_000, 'the TLS failure to be logged');
    const line = logged(tg, 'limit store TLS failed')[0]!;
    assert.equal(line.level, 50);
    assert.equal(line.code, 'SELF_SIGNED_CERT_IN_CHAIN');
    assert.equal(line.store, `rediss://sluice:***@127.0.0.1:${redis.port}/0`);
    assert.deepEqual(await status(tg), { status: 503, error: 'limits_unavailable' });
    // (Redis sends its chain up to the CA, which this gateway does not trust.) The client tries
    // again (each failure counted); the outage is logged once.
    await eventually(async () => (await metric(tg, 'sluice_limit_store_errors_total'))! >= 2, 10_000, 'the failures to be counted');
    assert.equal(logged(tg, 'limit store TLS failed').length, 1);
    assert.ok(logged(tg, 'limit store unreachable').every((l) => !String(l.err).includes('certificate')), 'a TLS failure is not called unreachable');
    assert.equal(logged(tg, 'limit store reachable').length, 0);
    assertNoPassword(tg.logText());
  });

  test('without storeCaFile the private CA is not trusted; a certificate for another name is refused (ERR_TLS_CERT_ALTNAME_INVALID)', async () => {
    const untrusted = await gateway({ requestsPerMinute: 100 }, { store: `rediss://sluice:${ENCODED}@127.0.0.1:${redis.port}`, prefix: 'tls3:' });
    await eventually(() => logged(untrusted, 'limit store TLS failed').length === 1, 10_000, 'the TLS failure to be logged');
    assert.equal(logged(untrusted, 'limit store TLS failed')[0]!.code, 'SELF_SIGNED_CERT_IN_CHAIN');
    const elsewhere = await startRedis(undefined, { ...ca.issue('elsewhere', 'DNS:redis.elsewhere.test'), caFile: ca.certFile });
    try {
      const tg = await gateway({ requestsPerMinute: 100 }, { store: `rediss://127.0.0.1:${elsewhere.port}`, storeCaFile: ca.certFile, prefix: 'tls3:' });
      await eventually(() => logged(tg, 'limit store TLS failed').length === 1, 10_000, 'the name mismatch to be logged');
      assert.equal(logged(tg, 'limit store TLS failed')[0]!.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
      assert.deepEqual(await status(tg), { status: 503, error: 'limits_unavailable' });
    } finally {
      await elsewhere.close();
    }
  });

  test('a Redis that wants a client certificate refuses the handshake: logged with OpenSSL’s code', async () => {
    const strict = await startRedis(undefined, { ...ca.issue('strict'), caFile: ca.certFile, authClients: true });
    try {
      const tg = await gateway({ requestsPerMinute: 100 }, { store: `rediss://127.0.0.1:${strict.port}`, storeCaFile: ca.certFile, prefix: 'tls4:' });
      await eventually(() => logged(tg, 'limit store TLS failed').length === 1, 10_000, 'the refused handshake to be logged');
      assert.equal(logged(tg, 'limit store TLS failed')[0]!.code, 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
      assert.deepEqual(await status(tg), { status: 503, error: 'limits_unavailable' });
      await eventually(async () => (await metric(tg, 'sluice_limit_store_errors_total'))! >= 2, 10_000, 'the failures to be counted');
      assert.equal(logged(tg, 'limit store TLS failed').length, 1);
    } finally {
      await strict.close();
    }
  });

  test('storeCertFile and storeKeyFile present a client certificate to a Redis that wants one; one of another CA is refused until a reload reads the right one', async () => {
    const strict = await startRedis(undefined, { ...ca.issue('strict2'), caFile: ca.certFile, authClients: true });
    try {
      const good = ca.issue('gateway-client');
      const top = { store: `rediss://127.0.0.1:${strict.port}`, storeCaFile: ca.certFile, storeCertFile: good.certFile, storeKeyFile: good.keyFile, prefix: 'tls6:' };
      const tg = await gateway({ requestsPerMinute: 1 }, top);
      await eventually(() => logged(tg, 'limit store reachable').length === 1, 10_000, 'the store to take the client certificate');
      assert.equal(await decided(tg), 200);
      await eventually(async () => (await status(tg)).status === 429, 10_000, 'the limit to hold');

      const wrong = otherCa.issue('stranger');
      const certFile = join(dir, 'client.crt');
      const keyFile = join(dir, 'client.key');
      copyFileSync(wrong.certFile, certFile);
      copyFileSync(wrong.keyFile, keyFile);
      const rotated = { ...top, storeCertFile: certFile, storeKeyFile: keyFile, prefix: 'tls7:' };
      const other = await gateway({ requestsPerMinute: 1 }, rotated);
      await eventually(() => logged(other, 'limit store TLS failed').length === 1, 10_000, 'the stranger certificate to be refused');
      assert.equal(logged(other, 'limit store TLS failed')[0]!.code, 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA');
      assert.deepEqual(await status(other), { status: 503, error: 'limits_unavailable' });
      copyFileSync(good.certFile, certFile);
      copyFileSync(good.keyFile, keyFile);
      // What SIGHUP does after reading the config again (cli/reload.ts).
      const reloaded = (): void => other.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, services: [rawService({ urls: [replica.url] }, { limits: { requestsPerMinute: 1 } })], limits: { onStoreDown: 'refuse', ...rotated } }));
      reloaded();
      assert.equal(logged(other, 'limit store client certificate reloaded').length, 1);
      await eventually(() => logged(other, 'limit store reachable').length === 1, 10_000, 'the store to take the new certificate');
      assert.equal(await decided(other), 200);
      // The same files again: nothing to log.
      reloaded();
      assert.equal(logged(other, 'limit store client certificate reloaded').length, 1);
    } finally {
      await strict.close();
    }
  });

  test('sluice serve, onStoreDown allow: requests pass while the CA file is wrong; the right CA in it and SIGHUP end the outage', async () => {
    const caFile = join(dir, 'store-ca.pem');
    writeFileSync(caFile, otherCa.cert);
    cli = await startCliGateway({
      workers: 2,
      limits: { store: `rediss://sluice:${ENCODED}@127.0.0.1:${redis.port}`, storeCaFile: caFile, prefix: 'tls5:', onStoreDown: 'allow' },
      services: [{ slug: 'svc', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256, limits: { requestsPerMinute: 1 } }], replicas: { urls: [replica.url] } }],
    });
    const gw = cli;
    const send = async (): Promise<number> => {
      const res = await fetch(gw.url('/x', 'svc'), { method: 'POST', headers: AUTH, body: '{}' });
      await res.arrayBuffer();
      return res.status;
    };
    await eventually(() => logged(gw, 'limit store TLS failed').length === 1, 10_000, 'the untrusted certificate to be logged');
    assert.equal(logged(gw, 'limit store TLS failed')[0]!.code, 'SELF_SIGNED_CERT_IN_CHAIN');
    for (let i = 0; i < 3; i++) assert.equal(await send(), 200, 'unlimited while the store is down');
    writeFileSync(caFile, `${ca.cert}${otherCa.cert}`);
    gw.child.kill('SIGHUP');
    await eventually(() => logged(gw, 'limit store CA reloaded').length === 1, 10_000, 'the CA file to be read again');
    assert.equal(logged(gw, 'limit store CA reloaded')[0]!.certificates, 2);
    await eventually(() => logged(gw, 'limit store reachable').length === 1, 10_000, 'the store to be trusted');
    assert.equal(logged(gw, 'limit store reachable')[0]!.store, `rediss://sluice:***@127.0.0.1:${redis.port}/0`);
    assert.equal(logged(gw, 'limit store TLS failed').length, 1);
    assert.equal(logged(gw, 'config changes other than tokens take effect on restart').length, 0, 'the file changed, not the config');
    // Limited again: one a minute.
    await eventually(async () => (await send()) === 429, 10_000, 'the limit to hold');
    assertNoPassword(gw.output());
  });
});
