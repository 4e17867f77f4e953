// Loading and unloading on demand (docs/operations.md#loading-and-unloading), black-box: real
// launched replicas (test/fixtures/pool-replica.ts, each journaling its start and exit) on a real
// gateway, the admin listener's POST /services/{slug}/load and /unload with real HTTP. The order
// of processes is read from the journal and the log, never from timing.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Agent, request } from 'undici';
import { sha256Hex } from '../../src/cli/token.js';
import { logged, secret, startTestGateway, TEST_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { events, open, pooled, post, scratch } from '../helpers/pool.js';
import { eventually, within } from '../helpers/wait.js';

const agent = new Agent({ connections: 20 });
after(() => agent.close());

const ADMIN_TOKEN = secret('slc_admin_token_for_the_on_demand_tests_0123456');
const ADMIN = { host: '127.0.0.1', port: 0, tokens: [{ name: 'ops', sha256: sha256Hex(ADMIN_TOKEN) }] };

interface AdminAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

/** `token` null: no Authorization header. */
async function admin(tg: TestGateway, method: string, path: string, token: string | null = ADMIN_TOKEN): Promise<AdminAnswer> {
  const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
  const res = await request(`http://127.0.0.1:${tg.gateway.adminPort!}${path}`, { method, headers, dispatcher: agent });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

function readyLines(tg: TestGateway, service: string): Record<string, unknown>[] {
  return tg.logs.filter((l) => l.msg === 'replica state' && l.service === service && l.to === 'ready');
}

test('load and unload need an admin token: none configured, none sent, a wrong one and a service token are 401; an unknown service 404; GET 405', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const without = await startTestGateway(pooled('a', 'gpu', journal), { pools: [{ name: 'gpu', size: 1 }], workers: 1, admin: { host: '127.0.0.1', port: 0 } });
  try {
    const refused = await admin(without, 'POST', '/services/a/load');
    assert.equal(refused.status, 401, 'no admin.tokens: nobody may load');
    assert.match(String((refused.body.error as { message: string }).message), /admin\.tokens/);
  } finally {
    await without.close();
  }
  const tg = await startTestGateway(pooled('a', 'gpu', journal), { pools: [{ name: 'gpu', size: 1 }], workers: 1, admin: ADMIN });
  try {
    for (const path of ['/services/a/load', '/services/a/unload']) {
      const none = await admin(tg, 'POST', path, null);
      assert.equal(none.status, 401, `${path} without a token`);
      assert.match(String(none.headers['www-authenticate']), /^Bearer /);
      assert.equal((none.body.error as { code: string }).code, 'unauthorized');
      assert.equal((await admin(tg, 'POST', path, 'slc_not_the_admin_token_at_all_0000000000000')).status, 401, `${path} with a wrong token`);
      assert.equal((await admin(tg, 'POST', path, TEST_TOKEN)).status, 401, `${path} with the service's token`);
      assert.equal((await admin(tg, 'POST', path, `${ADMIN_TOKEN}x`)).status, 401, `${path} with a longer token`);
    }
    const unknown = await admin(tg, 'POST', '/services/nope/load');
    assert.equal(unknown.status, 404);
    assert.equal((unknown.body.error as { code: string }).code, 'service_not_found');
    assert.equal((await admin(tg, 'POST', '/services/nope/unload')).status, 404);
    const get = await admin(tg, 'GET', '/services/a/load');
    assert.equal(get.status, 405);
    assert.equal(get.headers['allow'], 'POST');
    const head = await admin(tg, 'HEAD', '/services/a/unload');
    assert.equal(head.status, 405);
    assert.deepEqual(head.body, {}, 'no body for HEAD');
    assert.deepEqual(events(journal), [], 'nothing was started by a refused request');
    assert.equal(logged(tg, 'service load asked').length, 0);
  } finally {
    await tg.close();
  }
});

test('a load starts a replica ahead of traffic: the first request after it finds the replica ready and does not queue', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const tg = await startTestGateway(pooled('a', 'gpu', journal), { pools: [{ name: 'gpu', size: 1 }], workers: 2, admin: ADMIN });
  try {
    const loaded = await admin(tg, 'POST', '/services/a/load');
    assert.equal(loaded.status, 202);
    assert.deepEqual(loaded.body, { service: 'a', state: 'starting' });
    await eventually(() => readyLines(tg, 'a').length === 1, 20_000, 'a to be ready');
    const asked = logged(tg, 'service load asked');
    assert.equal(asked.length, 1);
    assert.equal(asked[0]!.tokenName, 'ops');
    assert.equal(asked[0]!.state, 'starting');
    const again = await admin(tg, 'POST', '/services/a/load');
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, { service: 'a', state: 'ready' });
    const answer = await post(tg, 'a', '/echo', agent);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.tag, 'a');
    await eventually(() => logged(tg, 'request').length === 1, 10_000, 'the access line');
    const line = logged(tg, 'request')[0]!;
    assert.equal(line.queuedMs, undefined, 'the request did not wait for a replica');
    assert.ok(tg.logs.indexOf(readyLines(tg, 'a')[0]!) < tg.logs.indexOf(line), 'the replica was ready before the request');
    assert.deepEqual(events(journal), ['start a'], 'one replica, started by the load');
  } finally {
    await tg.close();
  }
});

test('an unload stops the idle replica and frees its unit: another service of the pool then starts without an eviction', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const tg = await startTestGateway([pooled('a', 'gpu', journal), pooled('b', 'gpu', journal)], { pools: [{ name: 'gpu', size: 1 }], workers: 2, admin: ADMIN });
  try {
    assert.equal((await post(tg, 'a', '/echo', agent)).status, 200);
    const unloaded = await admin(tg, 'POST', '/services/a/unload');
    assert.equal(unloaded.status, 200);
    assert.deepEqual(unloaded.body, { service: 'a', stopped: ['a-1'], kept: [] });
    await eventually(() => events(journal).length === 2, 20_000, 'a to exit');
    assert.deepEqual(events(journal), ['start a', 'exit a']);
    const stopped = tg.logs.filter((l) => l.msg === 'replica state' && l.service === 'a' && l.to === 'draining');
    assert.equal(stopped.length, 1);
    assert.equal(stopped[0]!.reason, 'unloaded');
    await eventually(async () => {
      const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { pools: { used: number }[] };
      return status.pools[0]!.used === 0;
    }, 20_000, 'the unit to be free');
    const second = await post(tg, 'b', '/echo', agent);
    assert.equal(second.status, 200);
    assert.equal(second.body.units, '0', 'b got the unit a held');
    assert.deepEqual(events(journal), ['start a', 'exit a', 'start b']);
    assert.equal(logged(tg, 'pool replica evicted').length, 0, 'nothing was evicted: the unit was free');
    const empty = await admin(tg, 'POST', '/services/a/unload');
    assert.deepEqual(empty.body, { service: 'a', stopped: [], kept: [] }, 'nothing left to stop');
  } finally {
    await tg.close();
  }
});

test('an unload leaves a replica with a request in flight running: the request is answered whole, the next unload stops it', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const gate = join(dir, 'gate');
  const tg = await startTestGateway(pooled('a', 'gpu', journal), { pools: [{ name: 'gpu', size: 1 }], workers: 2, admin: ADMIN });
  try {
    const held = post(tg, 'a', `/held?gate=${encodeURIComponent(gate)}`, agent);
    await eventually(() => readyLines(tg, 'a').length === 1, 20_000, 'a to be ready');
    await eventually(async () => {
      const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { inflight: number }[] };
      return status.services[0]!.inflight === 1;
    }, 20_000, 'the request to be in flight');
    const unloaded = await admin(tg, 'POST', '/services/a/unload');
    assert.equal(unloaded.status, 200);
    assert.deepEqual(unloaded.body, { service: 'a', stopped: [], kept: ['a-1'] });
    open(gate);
    const answer = await within(held, 20_000, 'the held answer');
    assert.equal(answer.status, 200);
    assert.equal(answer.body.tag, 'a');
    assert.deepEqual(events(journal), ['start a'], 'a kept running');
    await eventually(() => logged(tg, 'request').length === 1, 10_000, 'the access line');
    const after = await admin(tg, 'POST', '/services/a/unload');
    assert.deepEqual(after.body, { service: 'a', stopped: ['a-1'], kept: [] });
    await eventually(() => events(journal).length === 2, 20_000, 'a to exit');
  } finally {
    await tg.close();
  }
});

function drained(tg: TestGateway, service: string): Record<string, unknown>[] {
  return tg.logs.filter((l) => l.msg === 'replica state' && l.service === service && l.to === 'draining');
}

test('X-Sluice-Keep-Alive keeps the replica that served the request from its idle stop: a later idle replica stops first; unload still stops it', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const fast = { idleTimeoutMs: 100, keepAliveMaxMs: 600_000 };
  const tg = await startTestGateway([pooled('a', 'gpu', journal, fast), pooled('b', 'gpu', journal, fast)], { pools: [{ name: 'gpu', size: 2 }], workers: 2, admin: ADMIN });
  try {
    const kept = await post(tg, 'a', '/echo', agent, { 'x-sluice-keep-alive': '10m' });
    assert.equal(kept.status, 200);
    assert.equal((await post(tg, 'b', '/echo', agent)).status, 200, 'b is used after a');
    await eventually(() => drained(tg, 'b').length === 1, 20_000, 'b to stop for idleness');
    assert.equal(drained(tg, 'b')[0]!.reason, 'idle');
    assert.equal(drained(tg, 'a').length, 0, 'a, used before b, is still loaded');
    assert.deepEqual(events(journal).filter((e) => e.endsWith(' a')), ['start a']);
    const unloaded = await admin(tg, 'POST', '/services/a/unload');
    assert.deepEqual(unloaded.body, { service: 'a', stopped: ['a-1'], kept: [] }, 'an unload does not wait for a keep-alive');
    assert.equal(drained(tg, 'a')[0]!.reason, 'unloaded');
  } finally {
    await tg.close();
  }
});

test('X-Sluice-Keep-Alive is bounded by replicas.keepAliveMaxMs (0: ignored), and a malformed or repeated one is 400', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const tg = await startTestGateway(
    [pooled('capped', 'gpu', journal, { idleTimeoutMs: 100, keepAliveMaxMs: 200 }), pooled('off', 'gpu', journal, { idleTimeoutMs: 100 })],
    { pools: [{ name: 'gpu', size: 2 }], workers: 1 },
  );
  try {
    for (const slug of ['capped', 'off']) assert.equal((await post(tg, slug, '/echo', agent, { 'x-sluice-keep-alive': '1h' })).status, 200);
    await eventually(() => drained(tg, 'capped').length === 1 && drained(tg, 'off').length === 1, 20_000, 'both to stop for idleness despite asking for an hour');
    assert.deepEqual(drained(tg, 'capped').concat(drained(tg, 'off')).map((l) => l.reason), ['idle', 'idle']);
    for (const value of ['-1', '5 m', '1d', '1.5s', 'forever', '']) {
      const refused = await post(tg, 'capped', '/echo', agent, { 'x-sluice-keep-alive': value });
      assert.equal(refused.status, 400, `X-Sluice-Keep-Alive: ${value}`);
      assert.match(String((refused.body.error as { message: string }).message), /X-Sluice-Keep-Alive/);
    }
    const twice = await request(tg.url('/echo', 'capped'), { method: 'POST', headers: ['authorization', `Bearer ${TEST_TOKEN}`, 'x-sluice-keep-alive', '1s', 'x-sluice-keep-alive', '2s'], body: 'x', dispatcher: agent });
    await twice.body.text();
    assert.equal(twice.statusCode, 400, 'repeated');
  } finally {
    await tg.close();
  }
});
