// The shared store of the limits per caller (docs/configuration.md#sharing-limits-across-gateways),
// black-box: a real redis-server (test/helpers/redis.ts), real gateways on port 0 naming it, a
// real replica. Two gateways share each limit within the bound (5 % or 1 request, whichever is
// larger); the store stopped: `allow` lets requests pass, counts the failures and logs the outage
// once, `refuse` answers 503 limits_unavailable; the store back: the limits hold again.
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'redis';
import { Agent, request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

let redis: TestRedis;
/** The test's own view of the store. */
let store: ReturnType<typeof createClient>;
let replica: TestReplica;
/** Requests the replica holds until the test lets them go (path /hold), by arrival. */
const held: ServerResponse[] = [];
const gateways: TestGateway[] = [];
// A request that hangs fails its test in seconds rather than undici's five minutes.
const agent = new Agent({ connections: 64, headersTimeout: 20_000 });

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function post(tg: TestGateway, path = '/x', body = '{}'): Promise<Answer> {
  const res = await request(tg.url(path), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body, dispatcher: agent });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

/**
 * A request the store decided on: one that waited past its 50 ms for the store (a busy machine)
 * gets 503 limits_unavailable with `onStoreDown: refuse` (the tests' default) and used nothing of
 * the limits, so it is sent again. With `allow` it would pass unlimited, which no test could
 * tell from an admission.
 */
async function decided(tg: TestGateway, path = '/x', body = '{}'): Promise<Answer> {
  for (let i = 0; ; i++) {
    const a = await post(tg, path, body);
    if (a.status !== 503 || a.headers['x-sluice-error'] !== 'limits_unavailable' || i >= 20) return a;
  }
}

/** A gateway on the test's Redis whose token has `limits`; a fresh `prefix` per test keeps their counts apart. */
async function gateway(limits: Record<string, unknown>, prefix: string, top: Record<string, unknown> = {}, workers = 1): Promise<TestGateway> {
  const store = { store: redis.url, prefix, onStoreDown: 'refuse', ...top };
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { workers, limits: store });
  gateways.push(tg);
  await eventually(() => tg.logs.some((l) => l.msg === 'limit store reachable'), 10_000, 'the gateway to reach the store');
  return tg;
}

function logged(tg: TestGateway, msg: string): number {
  return tg.logs.filter((l) => l.msg === msg).length;
}

describe('limits.store: redis', { skip: REDIS_SKIP }, () => {
  before(async () => {
    redis = await startRedis();
    store = createClient({ url: redis.url });
    store.on('error', () => undefined); // the outage tests stop the store under it
    await store.connect();
    replica = await startReplica(async (req: IncomingMessage, res: ServerResponse) => {
      await readBody(req);
      if (req.url === '/hold') {
        held.push(res);
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
  });

  after(async () => {
    for (const res of held) res.end('{}');
    for (const tg of gateways) await tg.close();
    await agent.close();
    await replica?.close();
    await store?.close().catch(() => undefined);
    await redis?.close();
  });

  test('two gateways share requestsPerMinute: admitted in all within the limit plus the bound, refusals name the limit', async () => {
    const limit = 20;
    // A request whose lease did not come within its 50 ms (a busy machine) gets 503 (onStoreDown
    // refuse), where `allow` would let it pass unlimited and out of the count.
    const [a, b] = [await gateway({ requestsPerMinute: limit }, 'rpm:', {}, 2), await gateway({ requestsPerMinute: limit }, 'rpm:')];
    const started = performance.now();
    const answers: Answer[] = [];
    // 60 requests, 6 at a time, alternating between the gateways.
    for (let round = 0; round < 10; round++) {
      answers.push(...(await Promise.all(Array.from({ length: 6 }, (_, i) => post(i % 2 === 0 ? a : b)))));
    }
    const elapsed = performance.now() - started;
    const admitted = answers.filter((x) => x.status === 200).length;
    // GCRA lets one more in every 60/limit s after the burst; the bound is max(1, 5 % of the limit).
    const due = limit + Math.floor(elapsed / ((60_000 / limit) | 0));
    assert.ok(admitted <= due + Math.max(1, Math.floor(limit * 0.05)), `admitted ${admitted} of ${answers.length}, due ${due}`);
    const unavailable = answers.filter((x) => x.status === 503).length;
    // Each gateway may hold one leased request that the other cannot use.
    assert.ok(admitted + unavailable >= limit - 2, `admitted ${admitted}, ${unavailable} not decided in time: the limit is shared, not split`);
    const refused = answers.filter((x) => x.status === 429);
    assert.equal(refused.length + admitted + unavailable, answers.length);
    for (const r of refused) {
      assert.equal(r.headers['x-sluice-error'], 'rate_limited');
      assert.equal((JSON.parse(r.body) as { error: { limit: string } }).error.limit, 'requestsPerMinute');
      assert.ok(Number(r.headers['retry-after']) >= 1);
    }
    assert.ok(answers.slice(0, 6).every((x) => x.status !== 429), 'the first requests wait for their lease, they are not refused');
  });

  test('two gateways share tokensPerMinute: what one settled refuses the other', async () => {
    const [a, b] = [await gateway({ tokensPerMinute: 100 }, 'tpm:'), await gateway({ tokensPerMinute: 100 }, 'tpm:')];
    // Each request reserves its max_tokens (30) and settles with it: 0, 30, 60, 90 counted → admitted; 120 → refused.
    const body = JSON.stringify({ max_tokens: 30 });
    assert.deepEqual([(await post(a, '/x', body)).status, (await post(a, '/x', body)).status, (await post(a, '/x', body)).status, (await post(a, '/x', body)).status], [200, 200, 200, 200]);
    assert.equal((await post(a, '/x', body)).status, 429);
    // b learns of a's 120 tokens at its next sync: requests without max_tokens count nothing while it polls.
    let last: Answer | undefined;
    await eventually(async () => (last = await post(b)).status === 429, 10_000, 'the other gateway to refuse');
    assert.equal((JSON.parse(last!.body) as { error: { limit: string } }).error.limit, 'tokensPerMinute');
  });

  test('two gateways share concurrent: a place held at one is not free at the other, and comes back when it ends', async () => {
    const [a, b] = [await gateway({ concurrent: 2 }, 'conc:'), await gateway({ concurrent: 2 }, 'conc:')];
    // One at a time, so that the replica holds a's first.
    const first = decided(a, '/hold');
    await eventually(() => held.length >= 1, 10_000, "a's held request to reach the replica");
    const second = decided(b, '/hold');
    await eventually(() => held.length >= 2, 10_000, "b's held request to reach the replica");
    const refusedAtA = await decided(a);
    const refusedAtB = await decided(b);
    assert.deepEqual([refusedAtA.status, refusedAtB.status], [429, 429]);
    assert.equal((JSON.parse(refusedAtB.body) as { error: { limit: string } }).error.limit, 'concurrent');
    held.shift()!.end('{}');
    assert.equal((await first).status, 200);
    // a gives its place back at its next sync; then b may take it.
    await eventually(async () => (await decided(b)).status === 200, 10_000, 'the freed place to reach the other gateway');
    held.shift()!.end('{}');
    assert.equal((await second).status, 200);
  });

  test('a gateway that closes gives its places back to the store at once, and the other gateway takes the place', async () => {
    const a = await gateway({ concurrent: 1 }, 'leave:');
    const b = await gateway({ concurrent: 1 }, 'leave:');
    const first = decided(a, '/hold').catch(() => undefined);
    await eventually(() => held.length >= 1, 10_000, "a's held request to reach the replica");
    assert.equal((await decided(b)).status, 429, 'the one place is at a');
    const places = async (): Promise<number[]> => Object.values(await store.hGetAll('leave:svc:test:slots')).map(Number);
    assert.equal((await places()).reduce((x, y) => x + y, 0), 1, 'the store counts the place at a');
    gateways.splice(gateways.indexOf(a), 1);
    await a.close(); // the held request is cut: a's place goes with it
    await first;
    held.shift()!.end('{}');
    assert.ok((await places()).every((n) => n === 0), "a's entry is gone from the store, not left for the store's 5 s");
    await eventually(async () => (await decided(b)).status === 200, 10_000, 'the other gateway to take the place');
  });

  test('store down with onStoreDown allow: requests pass unlimited, the failure is counted and logged once; back: the limit holds again', async () => {
    const tg = await gateway({ requestsPerMinute: 1 }, 'allow:', { onStoreDown: 'allow' });
    // A request that waits past its 50 ms for the store (a busy machine) passes too (allow): the
    // limit shows by a 429 coming, not by which request gets it.
    assert.equal((await post(tg)).status, 200);
    await eventually(async () => (await post(tg)).status === 429, 10_000, 'the limit to refuse');
    await redis.stop();
    await eventually(() => logged(tg, 'limit store unreachable') === 1, 10_000, 'the outage to be logged');
    for (let i = 0; i < 5; i++) assert.equal((await post(tg)).status, 200, 'unlimited while the store is down');
    assert.ok((await metric(tg, 'sluice_limit_store_errors_total'))! >= 1);
    assert.equal(logged(tg, 'limit store unreachable'), 1, 'one line per outage');
    await redis.start();
    await eventually(() => logged(tg, 'limit store reachable') === 2, 10_000, 'the store to be back');
    // The restarted store kept nothing (no persistence): the burst of one, then 429 again.
    assert.equal((await post(tg)).status, 200);
    await eventually(async () => (await post(tg)).status === 429, 10_000, 'the limit to hold again');
    assert.equal(logged(tg, 'limit store unreachable'), 1);
  });

  test('store down with onStoreDown refuse: 503 limits_unavailable, the error JSON of the others', async () => {
    const tg = await gateway({ requestsPerMinute: 100 }, 'refuse:');
    assert.equal((await decided(tg)).status, 200);
    await redis.stop();
    try {
      await eventually(() => logged(tg, 'limit store unreachable') === 1, 10_000, 'the outage to be logged');
      const a = await post(tg);
      assert.equal(a.status, 503);
      assert.equal(a.headers['x-sluice-error'], 'limits_unavailable');
      assert.equal(a.headers['retry-after'], '1');
      const error = (JSON.parse(a.body) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'limits_unavailable');
      assert.match(error.message, /limits/);
      assert.equal(held.length, 0);
    } finally {
      await redis.start();
    }
    await eventually(() => logged(tg, 'limit store reachable') === 2, 10_000, 'the store to be back');
    assert.equal((await decided(tg)).status, 200);
  });
});
