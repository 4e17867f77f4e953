// LLM token usage through a router (docs/operations.md#llm-token-usage): a router's token has its
// `sluice_llm_tokens_total` series as a service's token does, under the router's slug in
// `service` (as `sluice_rate_limited_total` and its limits count it), at 0 from the start or from
// the reload that added it, whichever service served the request; the served service's own tokens
// count none of it. The access line names the service, the router, the router's token and the
// usage. Black-box: the real gateway on port 0 (one worker and two), a real replica reporting usage.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { parseConfig } from '../../src/config/load.js';
import { metricSamples, type RawService, secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const TEAM_A = secret('slc_router_usage_team_a_token_0123456789abcdef');
const TEAM_B = secret('slc_router_usage_team_b_token_0123456789abcdef');
const LATER = secret('slc_router_usage_later_token_0123456789abcdefgh');

let replica: TestReplica;
const gateways: TestGateway[] = [];

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 50, total_tokens: 60 } }));
  });
});

after(async () => {
  for (const tg of gateways) await tg.close();
  await replica.close();
});

function services(): RawService[] {
  return [
    { slug: 'chat', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }], models: ['m-chat'], replicas: { urls: [replica.url] } },
    { slug: 'code', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }], models: ['m-code'], replicas: { urls: [replica.url] } },
  ];
}

const MODELS_ROUTER = {
  slug: 'models',
  tokens: [
    { name: 'team-a', sha256: sha256Hex(TEAM_A), limits: { requestsPerMinute: 1000 } },
    { name: 'team-b', sha256: sha256Hex(TEAM_B) },
  ],
};

async function post(tg: TestGateway, router: string, token: string, model: string): Promise<number> {
  const res = await fetch(tg.url('/v1/chat/completions', router), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [] }) });
  await res.text();
  return res.status;
}

async function samples(tg: TestGateway): Promise<Map<string, number>> {
  return metricSamples(await (await fetch(`${tg.origin}/metrics`)).text());
}

function usage(service: string, token: string, kind: 'prompt' | 'completion'): string {
  return `sluice_llm_tokens_total{service="${service}",token="${token}",kind="${kind}"}`;
}

for (const workers of [1, 2]) {
  test(`workers: ${workers} — a router's tokens have usage series from the start, under the router's slug, counted whichever service served`, async () => {
    const tg = await startTestGateway(services(), { workers, routers: [MODELS_ROUTER] });
    gateways.push(tg);
    const start = await samples(tg);
    for (const token of ['team-a', 'team-b']) for (const kind of ['prompt', 'completion'] as const) assert.equal(start.get(usage('models', token, kind)), 0, `${token} ${kind} at the start`);
    assert.equal(start.get('sluice_rate_limited_total{service="models",token="team-a",limit="requestsPerMinute"}'), 0);

    assert.equal(await post(tg, 'models', TEAM_A, 'm-chat'), 200);
    assert.equal(await post(tg, 'models', TEAM_A, 'm-code'), 200);
    assert.equal(await post(tg, 'models', TEAM_B, 'm-code'), 200);
    await eventually(async () => (await samples(tg)).get(usage('models', 'team-b', 'completion')) === 50, 10_000, "team-b's usage in the metric");
    const after = await samples(tg);
    assert.equal(after.get(usage('models', 'team-a', 'prompt')), 20);
    assert.equal(after.get(usage('models', 'team-a', 'completion')), 100);
    assert.equal(after.get(usage('models', 'team-b', 'prompt')), 10);
    // Counted once, for the router's caller: not again under the served services' own token.
    for (const service of ['chat', 'code']) assert.equal(after.get(usage(service, 'test', 'completion')), 0, service);
    // The requests themselves count under the service that served them.
    assert.equal(after.get('sluice_requests_total{service="chat",status="200",outcome="ok"}'), 1);
    assert.equal(after.get('sluice_requests_total{service="code",status="200",outcome="ok"}'), 2);

    const lines = tg.logs.filter((l) => l['msg'] === 'request');
    assert.equal(lines.length, 3);
    for (const line of lines) {
      assert.equal(line['router'], 'models');
      assert.ok(line['service'] === 'chat' || line['service'] === 'code');
      assert.ok(line['tokenName'] === 'team-a' || line['tokenName'] === 'team-b');
      assert.equal(line['promptTokens'], 10);
      assert.equal(line['completionTokens'], 50);
    }
  });
}

test('a router added by SIGHUP has its tokens counted from the reload, at 0 first', async () => {
  const tg = await startTestGateway(services(), { workers: 2, routers: [MODELS_ROUTER] });
  gateways.push(tg);
  const later = { slug: 'later', tokens: [{ name: 'late-team', sha256: sha256Hex(LATER) }] };
  tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, workers: 2, services: services(), routers: [MODELS_ROUTER, later] }));
  await eventually(async () => (await samples(tg)).get(usage('later', 'late-team', 'prompt')) === 0, 10_000, "the new router's series");
  await eventually(async () => (await post(tg, 'later', LATER, 'm-chat')) === 200, 10_000, 'the new router to answer on every worker');
  await eventually(async () => (await samples(tg)).get(usage('later', 'late-team', 'completion')) === 50, 10_000, "the new router's usage");
  assert.equal((await samples(tg)).get(usage('models', 'team-a', 'completion')), 0, 'the first router is still there, its series kept');
});
