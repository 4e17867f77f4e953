// tokensPerDay shared by gateways (docs/configuration.md#sharing-limits-across-gateways),
// black-box: a real redis-server (test/helpers/redis.ts), two real gateways on port 0 naming it,
// a real replica whose answers report their usage. What one gateway settled of the day refuses
// the other (429 naming tokensPerDay, Retry-After until the next UTC midnight), each shows the
// day's count in all on /status, and the day's key in the store expires after the day.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'redis';
import { rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { type SseReplica, startSseReplica } from '../helpers/sse-replica.js';
import { assertRefusedUntil, nextUtcMidnight, nextUtcMonth, send, usage } from '../helpers/token-budget.js';
import { eventually } from '../helpers/wait.js';

let redis: TestRedis;
let store: ReturnType<typeof createClient>;
let replica: SseReplica;
const gateways: TestGateway[] = [];

async function gateway(limits: Record<string, unknown>, prefix: string): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { admin: { host: '127.0.0.1', port: 0 }, limits: { store: redis.url, prefix, onStoreDown: 'refuse' } });
  gateways.push(tg);
  await eventually(() => tg.logs.some((l) => l.msg === 'limit store reachable'), 10_000, 'the gateway to reach the store');
  return tg;
}

interface Window {
  limit: number;
  used: number;
  reserved: number;
  resetsAt: string;
}

async function windows(tg: TestGateway): Promise<{ tokensPerDay?: Window; tokensPerMonth?: Window }> {
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: { tokensPerDay?: Window; tokensPerMonth?: Window }[] }[] };
  return status.services[0]!.limits[0]!;
}

/** A request that the store decided on (one whose top-up came too late on a busy machine gets 503 with `refuse`, uses nothing, and is sent again). */
async function decided(tg: TestGateway, prompt: number, completion: number): Promise<Awaited<ReturnType<typeof send>>> {
  for (let i = 0; ; i++) {
    const a = await send(tg, usage(prompt, completion));
    if (a.status !== 503 || i >= 20) return a;
  }
}

describe('tokensPerDay and tokensPerMonth with limits.store: redis', { skip: REDIS_SKIP }, () => {
  before(async () => {
    redis = await startRedis();
    store = createClient({ url: redis.url });
    await store.connect();
    replica = await startSseReplica();
  });

  after(async () => {
    for (const tg of gateways) await tg.close();
    await replica?.close();
    await store?.close().catch(() => undefined);
    await redis?.close();
  });

  test('two gateways share a day: what one settled refuses the other until the next UTC midnight', async () => {
    const [a, b] = [await gateway({ tokensPerDay: 100 }, 'day:'), await gateway({ tokensPerDay: 100 }, 'day:')];
    assert.equal((await decided(a, 50, 20)).status, 200); // 70 of the day at a
    // b learns of them at its next sync.
    await eventually(async () => (await windows(b)).tokensPerDay?.used === 70, 10_000, 'b to count what a settled');
    assert.equal((await decided(b, 20, 10)).status, 200); // 100 in all
    await eventually(async () => (await windows(a)).tokensPerDay?.used === 100, 10_000, 'a to count what b settled');
    assertRefusedUntil(await decided(a, 1, 0), 'tokensPerDay', nextUtcMidnight);
    assertRefusedUntil(await decided(b, 1, 0), 'tokensPerDay', nextUtcMidnight);
    // The day's key expires after the day (and a margin), not before it ends.
    const keys = await store.keys('day:*:d:*');
    assert.equal(keys.length, 1, keys.join(' '));
    const asked = Date.now();
    const ttl = await store.pTTL(keys[0]!);
    const answered = Date.now();
    const lowest = nextUtcMidnight(answered) - answered;
    const highest = nextUtcMidnight(asked) - asked + 120_000;
    assert.ok(ttl >= lowest && ttl <= highest, `the day's key expires in ${ttl} ms, expected from ${lowest} to ${highest}`);
  });

  test('two gateways share a month', async () => {
    const [a, b] = [await gateway({ tokensPerMonth: 40 }, 'month:'), await gateway({ tokensPerMonth: 40 }, 'month:')];
    assert.equal((await decided(a, 30, 10)).status, 200);
    await eventually(async () => (await windows(b)).tokensPerMonth?.used === 40, 10_000, 'b to count what a settled');
    assertRefusedUntil(await decided(b, 1, 0), 'tokensPerMonth', nextUtcMonth);
    const keys = await store.keys('month:*:m:*');
    assert.equal(keys.length, 1, keys.join(' '));
  });
});
