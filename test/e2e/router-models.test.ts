// The OpenAI model endpoints of a router (docs/api.md#routers), through the OpenAI Node SDK:
// `models.list` and `models.retrieve` with `created` (when the config first named the model, the
// same on every call and kept by a reload) and `expected_ready_ms` (null while ready or before any
// start was measured; a cold model's expected start once one was), `404 model_not_found` for a
// model the router does not serve, and a model id with a slash in it.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import { parseConfig } from '../../src/config/load.js';
import { startTestGateway, TEST_TOKEN, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { GATED_MODEL_SERVER } from '../helpers/overview.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const tokens = [{ name: 'test', sha256: TEST_TOKEN_SHA256 }];
let tg: TestGateway | undefined;
let replica: TestReplica | undefined;
after(async () => {
  await tg?.close();
  await replica?.close();
});

type ModelObject = Record<string, unknown>;

test('models.list and models.retrieve: created, state, expected_ready_ms; 404 model_not_found', async () => {
  const before = Math.floor(Date.now() / 1000);
  replica = await startReplica((_req, res) => {
    res.end('{}');
  });
  const gate = join(mkdtempSync(join(tmpdir(), 'sluice-gate-')), 'open');
  writeFileSync(gate, '');
  const services = [
    { slug: 'chat', tokens, models: ['llama', 'org/model-x'], replicas: { urls: [replica.url] } },
    { slug: 'gated', tokens, models: ['demo'], replicas: { command: [process.execPath, GATED_MODEL_SERVER], env: { GATE_FILE: gate }, readyPath: '/health', max: 1, idleTimeoutMs: 200 } },
  ];
  const raw = { listen: { host: '127.0.0.1', port: 0 }, services, routers: [{ slug: 'models', tokens }] };
  tg = await startTestGateway(services, { workers: 1, routers: raw.routers });
  const client = new OpenAI({ baseURL: tg.url('/v1', 'models'), apiKey: TEST_TOKEN, maxRetries: 0, timeout: 20_000 });

  const list = (await client.models.list()).data as unknown as ModelObject[];
  assert.deepEqual(
    list.map((m) => [m['id'], m['state'], m['expected_ready_ms']]),
    [
      ['llama', 'ready', null],
      ['org/model-x', 'ready', null],
      ['demo', 'cold', null], // no start measured yet
    ],
  );
  const created = list[0]!['created'] as number;
  assert.ok(Number.isInteger(created) && created >= before && created <= Math.floor(Date.now() / 1000), `created ${created}`);
  assert.ok(
    list.every((m) => m['created'] === created),
    'every model the config named at start: the start',
  );

  const one = (await client.models.retrieve('org/model-x')) as unknown as ModelObject;
  assert.deepEqual(one, { id: 'org/model-x', object: 'model', created, owned_by: 'sluice', service: 'chat', state: 'ready', expected_ready_ms: null });
  await assert.rejects(client.models.retrieve('gpt-9'), (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && e.headers.get('x-sluice-error') === 'model_not_found');
  await assert.rejects(client.models.retrieve('llama/extra'), OpenAI.NotFoundError);

  // One measured start, then the idle stop: the cold model says when it would be ready.
  const chat = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hi' }] });
  assert.ok(chat.choices.length > 0);
  let cold: ModelObject | undefined;
  await eventually(async () => (cold = (await client.models.retrieve('demo')) as unknown as ModelObject)['state'] === 'cold', 20_000, 'the idle stop');
  assert.equal(typeof cold!['expected_ready_ms'], 'number');
  assert.ok((cold!['expected_ready_ms'] as number) > 0);

  // A reload that adds a model keeps the others' created.
  const more = { ...raw, services: [{ ...services[0]!, models: ['llama', 'org/model-x', 'llama-2'] }, services[1]!] };
  tg.gateway.reload(parseConfig(more as never, {}));
  await eventually(async () => (await client.models.list()).data.length === 4, 10_000, 'the reloaded model list');
  const after = (await client.models.list()).data as unknown as ModelObject[];
  assert.equal(after.find((m) => m['id'] === 'llama')!['created'], created);
  assert.ok((after.find((m) => m['id'] === 'llama-2')!['created'] as number) >= created);
});
