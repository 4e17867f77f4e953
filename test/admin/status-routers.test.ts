// GET /status shows routers (docs/operations.md#status): each router's base URL, the services it
// routes to, every model with its service's state as the request goes cold → starting → ready,
// its limited tokens' use (the name of an unlimited token never), and a router added by a reload.
// Black-box: a real replica, a launched replica whose start the test gates, the gateway on port 0
// with two data plane threads.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { parseConfig } from '../../src/config/load.js';
import { secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { GATED_MODEL_SERVER } from '../helpers/overview.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const LIMITED = secret('slc_router_limited_token_for_status_tests_0123456789');
const FREE = secret('slc_router_unlimited_token_for_status_tests_0123456789');

interface ModelStatus {
  id: string;
  service: string;
  state: string;
}

interface RouterStatus {
  slug: string;
  baseUrl: string;
  services: string[];
  models: ModelStatus[];
  limits: ({ token: string } & Record<string, unknown>)[];
}

interface Status {
  services: { slug: string; state: string; queued: number }[];
  routers: RouterStatus[];
}

describe('/status with routers over a static service and a cold launched one', () => {
  let replica: TestReplica;
  let tg: TestGateway;
  let admin: string;
  let raw: Record<string, unknown>;
  const gate = join(mkdtempSync(join(tmpdir(), 'sluice-gate-')), 'open');

  before(async () => {
    replica = await startReplica(async (req, res) => {
      await readBody(req);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url }));
    });
    raw = {
      services: [
        { slug: 'api', tokens: [{ name: 'api-caller', sha256: TEST_TOKEN_SHA256 }], models: ['api-model'], replicas: { urls: [replica.url] } },
        {
          slug: 'llm',
          tokens: [{ name: 'llm-caller', sha256: TEST_TOKEN_SHA256 }],
          models: ['demo', 'demo-large'],
          replicas: { command: [process.execPath, GATED_MODEL_SERVER], env: { GATE_FILE: gate, TOKEN_DELAY_MS: '5' }, readyPath: '/health', max: 1 },
        },
        { slug: 'plain', tokens: [{ name: 'plain-caller', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: [replica.url] } },
      ],
      routers: [
        {
          slug: 'models',
          tokens: [
            { name: 'router-limited', sha256: sha256Hex(LIMITED), limits: { concurrent: 3 } },
            { name: 'router-free', sha256: sha256Hex(FREE) },
          ],
        },
        { slug: 'only-llm', tokens: [{ name: 'router-free', sha256: sha256Hex(FREE) }], services: ['llm'] },
      ],
    };
    tg = await startTestGateway(raw['services'] as never, { routers: raw['routers'], admin: { host: '127.0.0.1', port: 0 }, workers: 2 });
    admin = `http://127.0.0.1:${tg.gateway.adminPort}`;
  });

  after(async () => {
    writeFileSync(gate, 'open');
    await tg?.close();
    await replica?.close();
  });

  const status = async (): Promise<Status> => (await (await fetch(`${admin}/status`)).json()) as Status;
  const router = async (slug: string): Promise<RouterStatus> => {
    const found = (await status()).routers.find((r) => r.slug === slug);
    if (found === undefined) throw new Error(`no router ${slug} in /status`);
    return found;
  };
  const listed = async (slug: string): Promise<ModelStatus[]> => {
    const res = await fetch(`${(await router(slug)).baseUrl}/request/v1/models`, { headers: { authorization: `Bearer ${FREE}` } });
    assert.equal(res.status, 200);
    return ((await res.json()) as { data: ModelStatus[] }).data.map(({ id, service, state }) => ({ id, service, state }));
  };

  test('each router in config order: base URL, services, every model with its service and state, limited tokens only', async () => {
    const body = await status();
    assert.deepEqual(
      body.routers.map((r) => r.slug),
      ['models', 'only-llm'],
    );
    const [models, onlyLlm] = body.routers as [RouterStatus, RouterStatus];
    assert.deepEqual(Object.keys(models).sort(), ['baseUrl', 'limits', 'models', 'services', 'slug']);
    assert.equal(models.baseUrl, `${tg.origin}/api/v1/services/models`);
    assert.deepEqual(models.services, ['api', 'llm'], 'every service with models, in config order');
    assert.deepEqual(models.models, [
      { id: 'api-model', service: 'api', state: 'ready' },
      { id: 'demo', service: 'llm', state: 'cold' },
      { id: 'demo-large', service: 'llm', state: 'cold' },
    ]);
    assert.deepEqual(models.limits, [{ token: 'router-limited', concurrent: { limit: 3, used: 0 } }]);
    assert.deepEqual(onlyLlm.services, ['llm']);
    assert.deepEqual(onlyLlm.models.map((m) => m.id), ['demo', 'demo-large']);
    assert.deepEqual(onlyLlm.limits, []);
    // The states are the ones the router's own model list gives.
    assert.deepEqual(await listed('models'), models.models);
    const text = JSON.stringify(body);
    assert.ok(!text.includes('router-free'), 'no name of a token without limits');
    assert.ok(!text.includes(sha256Hex(LIMITED)) && !text.includes(LIMITED), 'no token nor digest');
  });

  test('a routed request to the cold model: its models go starting (the limited token holds a place while queued), then ready', async () => {
    const asked = fetch(`${(await router('models')).baseUrl}/request/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${LIMITED}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo-large', messages: [{ role: 'user', content: 'one two' }] }),
    });
    await eventually(async () => (await status()).services.find((s) => s.slug === 'llm')!.queued === 1, 10_000, 'the routed request queued for llm');
    const starting = await router('models');
    assert.deepEqual(
      starting.models.map((m) => `${m.id}:${m.state}`),
      ['api-model:ready', 'demo:starting', 'demo-large:starting'],
    );
    assert.deepEqual(starting.limits, [{ token: 'router-limited', concurrent: { limit: 3, used: 1 } }]);
    assert.deepEqual((await router('only-llm')).models.map((m) => m.state), ['starting', 'starting']);
    assert.deepEqual((await listed('models')).map((m) => m.state), ['ready', 'starting', 'starting']);

    writeFileSync(gate, 'open');
    const res = await asked;
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(((await res.json()) as { object: string }).object, 'chat.completion');
    await eventually(async () => ((await router('models')).limits[0]!['concurrent'] as { used: number }).used === 0, 10_000, 'the place given back');
    const ready = await router('models');
    assert.deepEqual(
      ready.models.map((m) => `${m.id}:${m.state}`),
      ['api-model:ready', 'demo:ready', 'demo-large:ready'],
    );
    assert.deepEqual(await listed('models'), ready.models);
  });

  test('a reload that adds a router and a model shows them; a service added by the reload is not served, nor listed', async () => {
    const next = structuredClone(raw) as { services: Record<string, unknown>[]; routers: Record<string, unknown>[] };
    (next.services[0]!['models'] as string[]).push('api-model-2');
    next.services.push({ slug: 'later', tokens: [{ name: 'later-caller', sha256: TEST_TOKEN_SHA256 }], models: ['later-model'], replicas: { urls: [replica.url] } });
    next.routers.push({ slug: 'api-only', tokens: [{ name: 'router-limited', sha256: sha256Hex(LIMITED), limits: { requestsPerMinute: 60 } }], services: ['api'] });
    tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, ...next }));
    const body = await status();
    assert.deepEqual(
      body.routers.map((r) => r.slug),
      ['models', 'only-llm', 'api-only'],
    );
    const [models, , apiOnly] = body.routers as [RouterStatus, RouterStatus, RouterStatus];
    assert.deepEqual(models.models.map((m) => m.id), ['api-model', 'api-model-2', 'demo', 'demo-large']);
    assert.deepEqual(models.services, ['api', 'llm']);
    assert.deepEqual(apiOnly.models, [
      { id: 'api-model', service: 'api', state: 'ready' },
      { id: 'api-model-2', service: 'api', state: 'ready' },
    ]);
    assert.deepEqual(apiOnly.limits, [{ token: 'router-limited', requestsPerMinute: { limit: 60, used: 0 } }]);
    // The reloaded workers route what /status says they route.
    await eventually(async () => (await listed('models')).length === 4, 10_000, 'the workers to apply the reload');
    assert.deepEqual(await listed('models'), models.models);
  });
});
