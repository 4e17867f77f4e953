// The shared store with a password (docs/configuration.md#sharing-limits-across-gateways,
// docs/operations.md#running-the-limit-store), black-box: a real redis-server that wants a password
// (test/helpers/redis.ts: the default user's password and an ACL user with only the commands the
// store needs), real gateways on port 0, a real replica. Two gateways share a limit, one with the
// password in the URL (percent-encoded), one with it in limits.storePasswordFile; a wrong or
// missing password, or a user not allowed PING, is an outage (onStoreDown) with its own log line
// and ends when Redis takes the gateway again; the password file is read again on reload; no log
// line, /status, /metrics or page ever holds the password.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'redis';
import { Agent } from 'undici';
import { parseConfig } from '../../src/config/load.js';
import { logged, metric, rawService, secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { STORE_COMMANDS, storeAnswer, storeDecided } from '../helpers/limit-store.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';
import { type CliGateway, startCliGateway } from '../helpers/workers.js';

// Characters a URL's user info must percent-encode, so that the decoding is tested too.
const PASSWORD = secret('s3cret@sluice:store/pw%#1');
const ENCODED = secret(encodeURIComponent(PASSWORD));
const ADMIN_PASSWORD = secret('the-default-users-password-42');
const WRONG = secret('not-the-password-of-anyone-7');

let redis: TestRedis;
let cli: CliGateway | undefined;
let replica: TestReplica;
let dir: string;
const gateways: TestGateway[] = [];
const agent = new Agent({ connections: 16, headersTimeout: 20_000 });

const status = (tg: TestGateway): ReturnType<typeof storeAnswer> => storeAnswer(tg, agent);
const decided = (tg: TestGateway): Promise<number> => storeDecided(tg, agent);

function passwordFile(name: string, content: string): string {
  const file = join(dir, name);
  writeFileSync(file, content);
  return file;
}

/** A fresh prefix per test keeps their counts apart. */
function storeLimits(top: Record<string, unknown>): Record<string, unknown> {
  return { onStoreDown: 'refuse', ...top };
}

async function gateway(limits: Record<string, unknown>, top: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { limits: storeLimits(top), ...extra });
  gateways.push(tg);
  return tg;
}

/** No log line holds the password in any form (close() checks every registered secret too). */
function assertNoPassword(tg: TestGateway): void {
  const text = tg.logText();
  for (const p of [PASSWORD, ENCODED, ADMIN_PASSWORD, WRONG]) assert.ok(!text.includes(p), 'a password in the log');
}

describe('limits.store with a password', { skip: REDIS_SKIP }, () => {
  before(async () => {
    redis = await startRedis({ password: ADMIN_PASSWORD, users: [`sluice on >${PASSWORD} ~pw* ${STORE_COMMANDS}`] });
    dir = mkdtempSync(join(tmpdir(), 'sluice-store-pw-'));
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
    rmSync(dir, { recursive: true, force: true });
  });

  test('two gateways share requestsPerMinute through a Redis with an ACL user: the password in the URL at one, in a file at the other', async () => {
    const a = await gateway({ requestsPerMinute: 2 }, { store: `redis://sluice:${ENCODED}@127.0.0.1:${redis.port}`, prefix: 'pw1:' }, { admin: { host: '127.0.0.1', port: 0 } });
    const b = await gateway({ requestsPerMinute: 2 }, { store: `redis://sluice@127.0.0.1:${redis.port}/0`, storePasswordFile: passwordFile('ok', `${PASSWORD}\n`), prefix: 'pw1:' });
    for (const tg of [a, b]) await eventually(() => logged(tg, 'limit store reachable').length === 1, 10_000, 'the gateways to reach the store');
    // Two of the four in all, whichever gateway admits them.
    const answers = [await decided(a), await decided(b), await decided(a), await decided(b)];
    assert.deepEqual(answers.slice().sort(), [200, 200, 429, 429], answers.join(' '));
    assert.equal(answers[0], 200);
    for (const tg of [a, b]) {
      assert.equal(logged(tg, 'limit store reachable')[0]!.store, `redis://sluice:***@127.0.0.1:${redis.port}/0`);
      assert.equal(logged(tg, 'limit store authentication failed').length, 0);
      assertNoPassword(tg);
    }
    // Nor on the admin listener: /status, the overview page's data, /metrics.
    const admin = `http://127.0.0.1:${a.gateway.adminPort!}`;
    for (const path of ['/status', '/metrics', '/']) {
      const text = await (await fetch(`${admin}${path}`)).text();
      assert.ok(!text.includes(PASSWORD) && !text.includes(ENCODED), `a password in ${path}`);
    }
  });

  test('a wrong password with onStoreDown refuse: 503 limits_unavailable, the failure counted and logged once with its code, never the password', async () => {
    const tg = await gateway({ requestsPerMinute: 100 }, { store: `redis://sluice:${WRONG}@127.0.0.1:${redis.port}`, prefix: 'pw2:' });
    await eventually(() => logged(tg, 'limit store authentication failed').length === 1, 10_000, 'the refused credentials to be logged');
    const line = logged(tg, 'limit store authentication failed')[0]!;
    assert.equal(line.level, 50);
    assert.equal(line.code, 'WRONGPASS');
    assert.equal(line.store, `redis://sluice:***@127.0.0.1:${redis.port}/0`);
    const a = await status(tg);
    assert.deepEqual(a, { status: 503, error: 'limits_unavailable' });
    // The client tries again (each failure counted); the outage is logged once.
    await eventually(async () => (await metric(tg, 'sluice_limit_store_errors_total'))! >= 2, 10_000, 'the failures to be counted');
    assert.equal(logged(tg, 'limit store authentication failed').length, 1);
    // (A connection slower than 1 s on a busy machine may log `unreachable`, never with the refusal.)
    assert.ok(logged(tg, 'limit store unreachable').every((l) => !String(l.err).includes('WRONGPASS')), 'a refusal is not called unreachable');
    assert.equal(logged(tg, 'limit store reachable').length, 0);
    assertNoPassword(tg);
  });

  test('no password for a Redis that wants one, onStoreDown allow: requests pass unlimited, logged with NOAUTH', async () => {
    const tg = await gateway({ requestsPerMinute: 1 }, { store: `redis://127.0.0.1:${redis.port}`, onStoreDown: 'allow', prefix: 'pw3:' });
    await eventually(() => logged(tg, 'limit store authentication failed').length === 1, 10_000, 'the refusal to be logged');
    assert.equal(logged(tg, 'limit store authentication failed')[0]!.code, 'NOAUTH');
    for (let i = 0; i < 4; i++) assert.equal((await status(tg)).status, 200, 'unlimited while the store refuses');
    // Still asked (each second or so): every failure counted, one line.
    await eventually(async () => (await metric(tg, 'sluice_limit_store_errors_total'))! >= 2, 10_000, 'the store to be asked again');
    assert.equal(logged(tg, 'limit store authentication failed').length, 1);
    assertNoPassword(tg);
  });

  test('the password file is read again on reload: a corrected password ends the outage', async () => {
    const file = passwordFile('rotated', `${WRONG}\r\n`);
    const top = { store: `redis://sluice@127.0.0.1:${redis.port}`, storePasswordFile: file, prefix: 'pw4:' };
    const tg = await gateway({ requestsPerMinute: 1 }, top);
    await eventually(() => logged(tg, 'limit store authentication failed').length === 1, 10_000, 'the wrong password to be refused');
    writeFileSync(file, PASSWORD);
    // What SIGHUP does after reading the config again (cli/reload.ts).
    tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, services: [rawService({ urls: [replica.url] }, { limits: { requestsPerMinute: 1 } })], limits: storeLimits(top) }));
    assert.equal(logged(tg, 'limit store password reloaded').length, 1);
    await eventually(() => logged(tg, 'limit store reachable').length === 1, 10_000, 'the store to take the new password');
    assert.equal(await decided(tg), 200);
    await eventually(async () => (await status(tg)).status === 429, 10_000, 'the limit to hold');
    // The same content again: nothing to log.
    tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, services: [rawService({ urls: [replica.url] }, { limits: { requestsPerMinute: 1 } })], limits: storeLimits(top) }));
    assert.equal(logged(tg, 'limit store password reloaded').length, 1);
    assertNoPassword(tg);
  });

  test('a user without PING (NOPERM) is logged with its code and asked again: PING granted in Redis ends the outage, no request needed', async () => {
    const own = await startRedis({ password: ADMIN_PASSWORD, users: [`noping on >${PASSWORD} ~pw* ${STORE_COMMANDS.replace('+ping ', '')}`] });
    const admin = createClient({ url: `redis://:${encodeURIComponent(ADMIN_PASSWORD)}@127.0.0.1:${own.port}` });
    try {
      const tg = await gateway({ requestsPerMinute: 1 }, { store: `redis://noping:${ENCODED}@127.0.0.1:${own.port}`, prefix: 'pw5:' });
      await eventually(() => logged(tg, 'limit store authentication failed').length === 1, 10_000, 'the refusal to be logged');
      assert.equal(logged(tg, 'limit store authentication failed')[0]!.code, 'NOPERM');
      await admin.connect();
      await admin.sendCommand(['ACL', 'SETUSER', 'noping', '+ping']);
      // The connection stays; the gateway asks again by itself (no request sent meanwhile).
      await eventually(() => logged(tg, 'limit store reachable').length === 1, 10_000, 'the store to be asked again');
      assert.equal(await decided(tg), 200);
      assertNoPassword(tg);
    } finally {
      await admin.close().catch(() => undefined);
      await own.close();
    }
  });

  test('sluice serve with workers: 2: SIGHUP reads the password file again, the store takes it, the log never holds it', async () => {
    const file = passwordFile('hup', `${WRONG}\n`);
    cli = await startCliGateway({
      workers: 2,
      limits: { store: `redis://sluice@127.0.0.1:${redis.port}`, storePasswordFile: file, prefix: 'pw6:', onStoreDown: 'allow' },
      services: [{ slug: 'svc', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256, limits: { requestsPerMinute: 1 } }], replicas: { urls: [replica.url] } }],
    });
    const gw = cli;
    const lines = (msg: string): Record<string, unknown>[] => gw.logs.filter((l) => l.msg === msg);
    await eventually(() => lines('limit store authentication failed').length === 1, 10_000, 'the wrong password to be refused');
    assert.equal(lines('limit store authentication failed')[0]!.code, 'WRONGPASS');
    writeFileSync(file, `${PASSWORD}\n`);
    gw.child.kill('SIGHUP');
    await eventually(() => lines('limit store password reloaded').length === 1, 10_000, 'the password file to be read again');
    await eventually(() => lines('limit store reachable').length === 1, 10_000, 'the store to take the new password');
    assert.equal(lines('limit store reachable')[0]!.store, `redis://sluice:***@127.0.0.1:${redis.port}/0`);
    assert.equal(lines('config changes other than tokens take effect on restart').length, 0, 'the file changed, not the config');
    for (const p of [PASSWORD, ENCODED, WRONG]) assert.ok(!gw.output().includes(p), 'a password in the output');
  });
});
