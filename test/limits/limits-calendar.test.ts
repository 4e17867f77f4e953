// tokensPerDay and tokensPerMonth (docs/api.md#limits-per-caller), black-box: the real gateway on
// port 0 and a real replica scripted by the request body (its answers report their usage). A
// budget spent: 429 rate_limited naming the limit, Retry-After = the seconds to the next reset
// (UTC midnight, the first of the next month), computed from the clock around the request. An
// answer below its reservation gives the rest back. /status shows used, limit and resetsAt.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { rawService, secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { type SseReplica, startSseReplica, type StreamScript } from '../helpers/sse-replica.js';
import { assertRefusedUntil, nextUtcMidnight, nextUtcMonth, send, usage } from '../helpers/token-budget.js';
import { eventually } from '../helpers/wait.js';

let replica: SseReplica;
const gateways: TestGateway[] = [];

before(async () => {
  replica = await startSseReplica();
});

after(async () => {
  for (const tg of gateways) await tg.close();
  await replica.close();
});

async function gateway(limits: Record<string, unknown>): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { admin: { host: '127.0.0.1', port: 0 } });
  gateways.push(tg);
  return tg;
}

test('tokensPerDay spent: 429 naming it, Retry-After until the next UTC midnight; /status shows used, limit, resetsAt', async () => {
  const tg = await gateway({ tokensPerDay: 100 });
  assert.equal((await send(tg, usage(60, 39))).status, 200);
  assert.equal((await send(tg, usage(1, 0))).status, 200);
  const refused = await send(tg, usage(1, 0));
  assertRefusedUntil(refused, 'tokensPerDay', nextUtcMidnight);
  assert.match(refused.headers.get('ratelimit') ?? '', /"tokens-day";r=0;t=\d+/);
  const metrics = await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/metrics`)).text();
  assert.ok(metrics.includes('sluice_rate_limited_total{service="svc",token="test",limit="tokensPerDay"} 1\n'), 'the refusal counted by its limit');
  assert.ok(metrics.includes('sluice_llm_tokens_total{service="svc",token="test",kind="prompt"} 61\n'), 'the prompt tokens counted');
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: { token: string; tokensPerDay?: { limit: number; used: number; reserved: number; resetsAt: string } }[] }[] };
  const day = status.services[0]!.limits[0]!.tokensPerDay!;
  assert.equal(day.limit, 100);
  assert.equal(day.used, 100);
  assert.equal(day.reserved, 0);
  assert.equal(Date.parse(day.resetsAt) % 86_400_000, 0);
  assert.ok(Date.parse(day.resetsAt) > Date.now() && Date.parse(day.resetsAt) <= Date.now() + 86_400_000, day.resetsAt);
});

test('tokensPerMonth spent: 429 naming it, Retry-After until the first of the next month, 00:00 UTC', async () => {
  const tg = await gateway({ tokensPerMonth: 50, tokensPerDay: 1000 });
  assert.equal((await send(tg, usage(25, 25))).status, 200);
  const refused = await send(tg, usage(1, 0));
  assertRefusedUntil(refused, 'tokensPerMonth', nextUtcMonth);
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: { tokensPerMonth?: { used: number; resetsAt: string }; tokensPerDay?: { used: number } }[] }[] };
  const t = status.services[0]!.limits[0]!;
  assert.equal(t.tokensPerMonth!.used, 50);
  assert.equal(t.tokensPerDay!.used, 50);
  assert.equal(Date.parse(t.tokensPerMonth!.resetsAt), nextUtcMonth(Date.now()));
});

test('an answer below its reservation gives the rest back: the day counts what answers reported', async () => {
  const tg = await gateway({ tokensPerDay: 100 });
  // Reserves 95 while it runs, settles with 10.
  assert.equal((await send(tg, usage(5, 5), { max_tokens: 95 })).status, 200);
  assert.equal((await send(tg, usage(80, 9))).status, 200); // 99 counted
  assert.equal((await send(tg, usage(1, 0))).status, 200); // admitted below 100, then 100
  assertRefusedUntil(await send(tg, usage(1, 0)), 'tokensPerDay', nextUtcMidnight);
});

test('a running request reserves its max_tokens of the day: another is refused until it ends', async () => {
  const tg = await gateway({ tokensPerDay: 100 });
  // A stream the replica holds open (gated) until the next request is refused.
  const slow: StreamScript = { gated: true, pieces: [[0, 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'], [0, 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n'], [0, 'data: [DONE]\n\n']] };
  const running = send(tg, slow, { max_tokens: 100, stream: true });
  await eventually(async () => {
    const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: { tokensPerDay: { reserved: number } }[] }[] };
    return status.services[0]!.limits[0]!.tokensPerDay.reserved === 100;
  }, 10_000, 'the reservation');
  assertRefusedUntil(await send(tg, usage(1, 0)), 'tokensPerDay', nextUtcMidnight);
  replica.release();
  replica.release();
  assert.equal((await running).status, 200);
  assert.equal((await send(tg, usage(1, 0))).status, 200);
});

test("a router token's tokensPerDay: counted over the router's services, refused until the next UTC midnight, on /status's routers", async () => {
  const routerToken = secret('slc_router_token_with_a_day_budget_0123456789');
  const tg = await startTestGateway([{ slug: 'svc', tokens: [{ name: 'svc-caller', sha256: TEST_TOKEN_SHA256 }], models: ['m'], replicas: { urls: [replica.url] } }], {
    routers: [{ slug: 'r', tokens: [{ name: 'team', sha256: sha256Hex(routerToken), limits: { tokensPerDay: 30 } }] }],
    admin: { host: '127.0.0.1', port: 0 },
  });
  gateways.push(tg);
  const call = async (prompt: number, completion: number): Promise<Awaited<ReturnType<typeof send>>> =>
    send(tg, usage(prompt, completion), { model: 'm' }, { url: tg.url('/v1/chat/completions', 'r'), token: routerToken });
  assert.equal((await call(20, 10)).status, 200);
  assertRefusedUntil(await call(1, 0), 'tokensPerDay', nextUtcMidnight);
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { routers: { slug: string; limits: { token: string; tokensPerDay?: { used: number; limit: number } }[] }[] };
  assert.deepEqual(status.routers[0]!.limits.map((l) => [l.token, l.tokensPerDay?.used, l.tokensPerDay?.limit]), [['team', 30, 30]]);
});
