// workers: 2 — SIGHUP reloads tokens in every worker: on fresh connections to each worker, the
// new token opens the service and the removed one is refused; the new token's name has its
// `sluice_llm_tokens_total` series, and the old name keeps its own.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { type CliGateway, connectionsOnEveryWorker, startCliGateway, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const OLD = 'slc_old_token_removed_by_the_reload_000000000000000';
const NEW = 'slc_new_token_added_by_the_reload_1111111111111111';

let gw: CliGateway | undefined;
let replica: TestReplica | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  if (gw !== undefined && gw.child.exitCode === null) gw.child.kill('SIGKILL');
  await replica?.close();
});

function config(token: string, name: string): Record<string, unknown> {
  return { workers: 2, services: [{ slug: 'svc', tokens: [{ name, sha256: sha256Hex(token) }], replicas: { urls: [replica!.url] } }] };
}

async function statusWith(c: WorkerConnection, token: string): Promise<number> {
  const res = await c.client.request({ path: '/api/v1/services/svc/request/x', method: 'POST', headers: { authorization: `Bearer ${token}` }, body: 'x' });
  await res.body.dump();
  return res.statusCode;
}

test('workers: 2 — a token added by SIGHUP works and a removed one is refused, on every worker', async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('ok');
  });
  gw = await startCliGateway(config(OLD, 'caller'));
  const before = await connectionsOnEveryWorker(gw, gw.origin, 2, 1);
  open.push(...before.flat());
  for (const c of before.flat()) {
    assert.equal(await statusWith(c, OLD), 200, `old token before the reload, worker ${c.worker}`);
    assert.equal(await statusWith(c, NEW), 401, `new token before the reload, worker ${c.worker}`);
  }

  const { port } = gw;
  writeFileSync(gw.configFile, JSON.stringify({ listen: { host: '127.0.0.1', port }, ...config(NEW, 'caller-2') }));
  gw.child.kill('SIGHUP');
  await eventually(
    () => [0, 1].every((w) => gw!.logs.some((l) => l.msg === 'tokens reloaded' && l.worker === w)),
    10_000,
    'both workers to reload their tokens',
  );

  const fresh = await connectionsOnEveryWorker(gw, gw.origin, 2, 2);
  open.push(...fresh.flat());
  for (const c of fresh.flat()) {
    assert.equal(await statusWith(c, NEW), 200, `new token after the reload, worker ${c.worker}`);
    assert.equal(await statusWith(c, OLD), 401, `old token after the reload, worker ${c.worker}`);
  }
  assert.ok(gw.logs.some((l) => l.msg === 'config reloaded'));
  const res = await fresh[0]![0]!.client.request({ path: '/metrics', method: 'GET' });
  const metrics = await res.body.text();
  for (const name of ['caller', 'caller-2']) {
    for (const kind of ['prompt', 'completion']) assert.match(metrics, new RegExp(`^sluice_llm_tokens_total\\{service="svc",token="${name}",kind="${kind}"\\} 0$`, 'm'));
  }
});
