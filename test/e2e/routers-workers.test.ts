// workers: 2 — a router on every worker thread: requests routed by model on each, and a model
// added by SIGHUP routed and listed by each (docs/api.md#routers, docs/operations.md#reloading-the-config).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { type CliGateway, connectionsOnEveryWorker, startCliGateway, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const TOKEN = 'slc_router_token_of_the_workers_test_333333333333';
const SERVICE_TOKEN = 'slc_service_token_of_the_workers_test_44444444444';

let gw: CliGateway | undefined;
const replicas: TestReplica[] = [];
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  if (gw !== undefined && gw.child.exitCode === null) gw.child.kill('SIGKILL');
  for (const r of replicas) await r.close();
});

function config(coderModels: string[]): Record<string, unknown> {
  const tokens = [{ name: 'svc', sha256: sha256Hex(SERVICE_TOKEN) }];
  return {
    workers: 2,
    services: [
      { slug: 'chat', tokens, models: ['llama'], replicas: { urls: [replicas[0]!.url] } },
      { slug: 'coder', tokens, models: coderModels, replicas: { urls: [replicas[1]!.url] } },
    ],
    routers: [{ slug: 'models', tokens: [{ name: 'router', sha256: sha256Hex(TOKEN) }] }],
  };
}

async function routed(c: WorkerConnection, model: string): Promise<{ status: number; text: string }> {
  const res = await c.client.request({
    path: '/api/v1/services/models/request/v1/completions',
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'x' }),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

async function listed(c: WorkerConnection): Promise<string[]> {
  const res = await c.client.request({ path: '/api/v1/services/models/request/v1/models', method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } });
  const list = (await res.body.json()) as { data: { id: string; service: string }[] };
  return list.data.map((m) => `${m.id}@${m.service}`);
}

test('workers: 2 — every worker routes by model, and a model added by SIGHUP is routed and listed by each', async () => {
  for (const name of ['chat', 'coder']) {
    replicas.push(
      await startReplica(async (req, res) => {
        await readBody(req);
        res.end(name);
      }),
    );
  }
  gw = await startCliGateway(config(['coder-7b']));
  const before = await connectionsOnEveryWorker(gw, gw.origin, 2, 1);
  open.push(...before.flat());
  for (const c of before.flat()) {
    assert.deepEqual(await routed(c, 'llama'), { status: 200, text: 'chat' }, `worker ${c.worker}`);
    assert.deepEqual(await routed(c, 'coder-7b'), { status: 200, text: 'coder' }, `worker ${c.worker}`);
    assert.equal((await routed(c, 'coder-34b')).status, 404, `worker ${c.worker}: not yet a model`);
    assert.deepEqual(await listed(c), ['llama@chat', 'coder-7b@coder'], `worker ${c.worker}`);
  }

  writeFileSync(gw.configFile, JSON.stringify({ listen: { host: '127.0.0.1', port: gw.port }, ...config(['coder-7b', 'coder-34b']) }));
  gw.child.kill('SIGHUP');
  await eventually(() => [0, 1].every((w) => gw!.logs.some((l) => l.msg === 'tokens reloaded' && l.worker === w)), 10_000, 'both workers to reload');
  const restart = gw.logs.filter((l) => l.msg === 'config changes other than tokens take effect on restart').flatMap((l) => l.keys as string[]);
  assert.deepEqual(restart.filter((key) => key !== 'listen'), [], 'models and routers apply at once');

  const fresh = await connectionsOnEveryWorker(gw, gw.origin, 2, 1);
  open.push(...fresh.flat());
  for (const c of fresh.flat()) {
    assert.deepEqual(await routed(c, 'coder-34b'), { status: 200, text: 'coder' }, `worker ${c.worker}`);
    assert.deepEqual(await listed(c), ['llama@chat', 'coder-7b@coder', 'coder-34b@coder'], `worker ${c.worker}`);
  }
});
