// Limits per caller (docs/api.md#limits-per-caller), black-box: the real gateway on port 0 and a
// real replica. Each limit alone, at the limit and over it: `429 rate_limited` with Retry-After and
// the RateLimit fields, the refused request never reaching the replica, the metric; with workers 1
// and 2, requests in parallel through both workers admit exactly the limit.
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';
import { eventually, within } from '../helpers/wait.js';

let replica: TestReplica;
/** Requests the replica holds until the test lets them go (path /hold), by arrival. */
const held: ServerResponse[] = [];
const gateways: TestGateway[] = [];
const open: WorkerConnection[] = [];
const agent = new Agent({ connections: 64 });

before(async () => {
  replica = await startReplica(async (req: IncomingMessage, res: ServerResponse) => {
    await readBody(req);
    if (req.url === '/hold') {
      held.push(res);
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ usage: { prompt_tokens: 10, completion_tokens: 50, total_tokens: 60 } }));
  });
});

after(async () => {
  for (const c of open) await c.client.close();
  for (const tg of gateways) await tg.close();
  await agent.close();
  await replica.close();
});

async function gateway(limits: Record<string, unknown>, workers = 1): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { workers });
  gateways.push(tg);
  return tg;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function post(tg: TestGateway, path = '/x', body = '{}'): Promise<Answer> {
  const res = await request(tg.url(path), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body, dispatcher: agent });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

function assertRateLimited(a: Answer, limit: string): number {
  assert.equal(a.status, 429);
  assert.equal(a.headers['x-sluice-error'], 'rate_limited');
  const error = (JSON.parse(a.body) as { error: { code: string; message: string; limit: string } }).error;
  assert.equal(error.code, 'rate_limited');
  assert.equal(error.limit, limit);
  assert.match(error.message, new RegExp(limit));
  const retryAfter = Number(a.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${String(a.headers['retry-after'])}`);
  assert.ok(typeof a.headers['ratelimit-policy'] === 'string');
  return retryAfter;
}

test('requestsPerMinute: a burst of the limit, then 429 with Retry-After until the next one is due; the replica sees only the admitted', async () => {
  const tg = await gateway({ requestsPerMinute: 3 });
  const before = replica.seen.length;
  const answers: Answer[] = [];
  for (let i = 0; i < 5; i++) answers.push(await post(tg));
  assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 429, 429]);
  assert.equal(replica.seen.length - before, 3);
  assert.equal(answers[0]!.headers['ratelimit-policy'], '"requests";q=3;w=60');
  assert.match(String(answers[0]!.headers['ratelimit']), /^"requests";r=2;t=\d+$/);
  assert.match(String(answers[2]!.headers['ratelimit']), /^"requests";r=0;t=\d+$/);
  // One every 20 s after the burst: the next is admitted once the first of the three is 60 s old.
  const retryAfter = assertRateLimited(answers[3]!, 'requestsPerMinute');
  assert.ok(retryAfter <= 20, `Retry-After ${retryAfter}`);
  assert.match(String(answers[3]!.headers['ratelimit']), /^"requests";r=0;t=\d+$/);
  assert.equal(await metric(tg, 'sluice_rate_limited_total{service="svc",token="test",limit="requestsPerMinute"}'), 2);
});

test('a token without limits gets no RateLimit fields and is never refused', async () => {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }));
  gateways.push(tg);
  for (let i = 0; i < 5; i++) {
    const a = await post(tg);
    assert.equal(a.status, 200);
    assert.equal(a.headers['ratelimit-policy'], undefined);
    assert.equal(a.headers['ratelimit'], undefined);
  }
});

test("a token's own limits replace the service's", async () => {
  const tg = await startTestGateway(
    rawService({ urls: [replica.url] }, { limits: { requestsPerMinute: 1 }, tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256, limits: { requestsPerMinute: 2 } }] }),
  );
  gateways.push(tg);
  assert.deepEqual([(await post(tg)).status, (await post(tg)).status, (await post(tg)).status], [200, 200, 429]);
});

test('tokensPerMinute: admitted while settled tokens and reservations are below the limit; Retry-After when the window frees', async () => {
  const tg = await gateway({ tokensPerMinute: 100 });
  const body = JSON.stringify({ model: 'm', max_tokens: 60, messages: [] });
  const first = await post(tg, '/x', body);
  assert.equal(first.status, 200);
  assert.equal(first.headers['ratelimit-policy'], '"tokens";q=100;w=60;qu="tokens"');
  // What is left once its own reservation (60) is counted.
  assert.match(String(first.headers['ratelimit']), /^"tokens";r=40;t=0$/);
  const second = await post(tg, '/x', body);
  assert.equal(second.status, 200);
  assert.match(String(second.headers['ratelimit']), /^"tokens";r=0;t=\d+$/);
  const third = await post(tg, '/x', body);
  const retryAfter = assertRateLimited(third, 'tokensPerMinute');
  assert.ok(retryAfter <= 60, `Retry-After ${retryAfter}`);
});

test('tokensPerMinute: a running request reserves its max_completion_tokens', async () => {
  const tg = await gateway({ tokensPerMinute: 100 });
  const waiting = post(tg, '/hold', JSON.stringify({ max_completion_tokens: 100, stream: true }));
  await eventually(() => held.length > 0, 10_000, 'the replica to hold the request');
  assertRateLimited(await post(tg), 'tokensPerMinute');
  held.shift()!.end('{}');
  assert.equal((await within(waiting, 10_000, 'the held answer')).status, 200);
});

describe('concurrent', () => {
  test('requests in flight up to the limit; released once at the end, when the caller leaves and when the replica fails', async () => {
    const tg = await gateway({ concurrent: 2 });
    held.length = 0;
    const ac = new AbortController();
    const a = request(tg.url('/hold'), { method: 'POST', headers: AUTH, body: 'a', dispatcher: agent, signal: ac.signal }).catch((err: unknown) => err);
    const b = post(tg, '/hold', 'b');
    await eventually(() => held.length === 2, 10_000, 'both requests at the replica');
    const refused = await post(tg);
    assert.equal(assertRateLimited(refused, 'concurrent'), 1);
    assert.equal(refused.headers['ratelimit'], '"concurrent";r=0');

    // The caller of `a` leaves: its place is free (and only its).
    ac.abort();
    await a;
    await eventually(() => tg.logs.some((l) => l.outcome === 'client_closed'), 10_000, 'the request whose caller left to end');
    assert.equal((await post(tg)).status, 200);
    // The replica fails `b`: its place is free too.
    held[1]!.socket?.destroy();
    const failed = await within(b, 10_000, 'the failed answer');
    assert.equal(failed.status, 502);
    // Both places are free, and no more: two held requests are admitted, a third is refused.
    held.length = 0;
    const c = post(tg, '/hold', 'c');
    const d = post(tg, '/hold', 'd');
    await eventually(() => held.length === 2, 10_000, 'two requests at the replica again');
    assertRateLimited(await post(tg), 'concurrent');
    for (const res of held.splice(0)) res.end('{}');
    assert.deepEqual([(await c).status, (await d).status], [200, 200]);
    assert.equal(await metric(tg, 'sluice_rate_limited_total{service="svc",token="test",limit="concurrent"}'), 2);
  });
});

for (const workers of [1, 2]) {
  test(`workers: ${workers} — requests in parallel through every worker admit exactly requestsPerMinute`, async () => {
    const tg = await gateway({ requestsPerMinute: 10 }, workers);
    const byWorker = await connectionsOnEveryWorker(tg, tg.origin, workers, 4);
    const conns = byWorker.flat();
    open.push(...conns);
    const path = new URL(tg.url('/x')).pathname;
    const before = replica.seen.length;
    const statuses = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const res = await conns[i % conns.length]!.client.request({ path, method: 'POST', headers: AUTH, body: '{}' });
        await res.body.dump();
        return res.statusCode;
      }),
    );
    assert.equal(statuses.filter((s) => s === 200).length, 10);
    assert.equal(statuses.filter((s) => s === 429).length, 20);
    assert.equal(replica.seen.length - before, 10);
    assert.equal(await metric(tg, 'sluice_rate_limited_total{service="svc",token="test",limit="requestsPerMinute"}'), 20);
  });
}

test("/status shows each limited token's use against its limits", async () => {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits: { requestsPerMinute: 5, concurrent: 3, tokensPerMinute: 1000 } }), { admin: { host: '127.0.0.1', port: 0 } });
  gateways.push(tg);
  for (let i = 0; i < 2; i++) assert.equal((await post(tg, '/x', JSON.stringify({ max_tokens: 100 }))).status, 200);
  // Each answer reported 10 + 50 tokens: what it settled with, not its max_tokens.
  const expected = JSON.stringify([
    { token: 'test', requestsPerMinute: { limit: 5, used: 2 }, concurrent: { limit: 3, used: 0 }, tokensPerMinute: { limit: 1000, used: 120, reserved: 0 } },
  ]);
  const limits = async (): Promise<string> => {
    const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: unknown[] }[] };
    return JSON.stringify(status.services[0]!.limits);
  };
  // A worker thread may end the request a moment after the caller has its last byte.
  await eventually(async () => (await limits()) === expected, 10_000, `/status to show ${expected}`);
});

test('a refusal by a limit logs `request refused` with the limit, and never the token', async () => {
  const tg = await gateway({ concurrent: 1 });
  held.length = 0;
  const first = post(tg, '/hold');
  await eventually(() => held.length === 1, 10_000, 'the request at the replica');
  assertRateLimited(await post(tg), 'concurrent');
  await eventually(() => tg.logs.some((l) => l.msg === 'request refused' && l.outcome === 'rate_limited'), 10_000, 'the refusal logged');
  const line = tg.logs.find((l) => l.msg === 'request refused' && l.outcome === 'rate_limited')!;
  assert.equal(line.limit, 'concurrent');
  assert.equal(line.status, 429);
  held.shift()!.end('{}');
  assert.equal((await first).status, 200);
});
