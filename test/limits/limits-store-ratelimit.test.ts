// The RateLimit field of admitted requests with the shared store (docs/api.md#limits-per-caller):
// what is left counts down across gateways, as one gateway alone counts it, so a client that paces
// itself by the header can. Black-box: a real redis-server, two gateways on port 0 naming it, a
// real replica. `requests`: what the store said is left after its last grant plus what this
// gateway holds leased, less what it has taken since (lower by the leases other gateways hold
// unused, the bound of the shared store); `concurrent`: the places the other gateways leave.
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { startHoldingReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

let redis: TestRedis;
let replica: TestReplica;
/** Requests the replica holds until the test lets them go (path /hold), by arrival. */
const held: ServerResponse[] = [];
const gateways: TestGateway[] = [];
const agent = new Agent({ connections: 16, headersTimeout: 20_000 });

interface Answer {
  status: number;
  ratelimit: string;
}

/** A request the store decided on (one that waited past its 50 ms on a busy machine gets 503 with `refuse`, uses nothing, and is sent again). */
async function decided(tg: TestGateway, path = '/x'): Promise<Answer> {
  for (let i = 0; ; i++) {
    const res = await request(tg.url(path), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{}', dispatcher: agent });
    await res.body.text();
    const answer = { status: res.statusCode, ratelimit: String(res.headers['ratelimit']) };
    if (res.statusCode !== 503 || res.headers['x-sluice-error'] !== 'limits_unavailable' || i >= 20) return answer;
  }
}

async function gateway(limits: Record<string, unknown>, prefix: string): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { workers: 1, limits: { store: redis.url, prefix, onStoreDown: 'refuse' } });
  gateways.push(tg);
  await eventually(() => tg.logs.some((l) => l.msg === 'limit store reachable'), 10_000, 'the gateway to reach the store');
  return tg;
}

/** The `r` and `t` of one item of a RateLimit value. */
function item(ratelimit: string, name: string): { r: number; t: number | undefined } {
  const m = new RegExp(`"${name}";r=(\\d+)(?:;t=(\\d+))?`).exec(ratelimit);
  assert.ok(m !== null, `no ${name} in ${ratelimit}`);
  return { r: Number(m[1]), t: m[2] === undefined ? undefined : Number(m[2]) };
}

describe('RateLimit with the shared store', { skip: REDIS_SKIP }, () => {
  before(async () => {
    redis = await startRedis();
    replica = await startHoldingReplica(held);
  });

  after(async () => {
    for (const res of held) res.end('{}');
    for (const tg of gateways) await tg.close();
    await agent.close();
    await replica?.close();
    await redis?.close();
  });

  test('requestsPerMinute 6 over two gateways: r counts down 5, 4, … 0 as with one gateway, t as GCRA says, then 429', async () => {
    const [a, b] = [await gateway({ requestsPerMinute: 6 }, 'rl-rpm:'), await gateway({ requestsPerMinute: 6 }, 'rl-rpm:')];
    const seen: { r: number; t: number }[] = [];
    for (let i = 0; i < 6; i++) {
      const answer = await decided(i % 2 === 0 ? a : b);
      assert.equal(answer.status, 200, `request ${i + 1}`);
      const { r, t } = item(answer.ratelimit, 'requests');
      seen.push({ r, t: t! });
    }
    const rs = seen.map((s) => s.r);
    assert.equal(rs[0], 5, `the first of 6 leaves 5: ${rs.join(', ')}`);
    rs.forEach((r, i) => {
      // A lease one gateway holds unused (a request that waited past its 50 ms on a busy machine) is not the other's: one less at most.
      assert.ok(r <= 5 - i && r >= 4 - i, `request ${i + 1} says r=${r}, left ${5 - i}: ${rs.join(', ')}`);
      if (i > 0) assert.ok(r <= rs[i - 1]!, `r never goes up: ${rs.join(', ')}`);
    });
    // t: until the quota is whole again, one interval (10 s) per request used.
    for (const { r, t } of seen) assert.equal(t, (6 - r) * 10, `r=${r} t=${t}`);
    assert.equal((await decided(a)).status, 429);
  });

  test('concurrent 4 over two gateways: r counts the places the other gateway holds', async () => {
    const [a, b] = [await gateway({ concurrent: 4 }, 'rl-conc:'), await gateway({ concurrent: 4 }, 'rl-conc:')];
    held.length = 0;
    const atA = [decided(a, '/hold')];
    await eventually(() => held.length === 1, 10_000, "a's first request at the replica");
    atA.push(decided(a, '/hold'));
    await eventually(() => held.length === 2, 10_000, "a's second request at the replica");
    const atB = decided(b, '/hold');
    await eventually(() => held.length === 3, 10_000, "b's request at the replica");
    for (const res of held.splice(0)) res.end('{}');
    const answers = [...(await Promise.all(atA)), await atB];
    assert.deepEqual(answers.map((x) => x.status), [200, 200, 200]);
    assert.deepEqual(answers.map((x) => item(x.ratelimit, 'concurrent').r), [3, 2, 1], answers.map((x) => x.ratelimit).join(' | '));
  });
});
