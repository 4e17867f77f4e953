// workers: 2 — SIGTERM drains every worker: a request in flight on each worker finishes, new
// requests are refused, the process exits 0 and no replica process is left behind.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { AUTH } from '../helpers/gateway.js';
import { isAlive } from '../helpers/launched.js';
import { type CliGateway, connectionsOnEveryWorker, GATE_REPLICA, startCliGateway, type WorkerConnection } from '../helpers/workers.js';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';

let gw: CliGateway | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.destroy().catch(() => undefined);
  if (gw !== undefined && gw.child.exitCode === null) gw.child.kill('SIGKILL');
});

test('workers: 2 — SIGTERM drains every worker, exits 0 and leaves no replica behind', async () => {
  gw = await startCliGateway({
    workers: 2,
    drainTimeoutMs: 20_000,
    services: [
      {
        slug: 'svc',
        tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }],
        replicas: { command: [process.execPath, GATE_REPLICA], readyPath: '/health', min: 1, max: 2 },
      },
    ],
  });
  await eventually(() => gw!.logs.some((l) => l.msg === 'replica state' && l.to === 'ready'), 15_000, 'the min replica to be ready');
  const spawned = gw.logs.find((l) => l.msg === 'replica process spawned')!;
  const replicaPid = Number(spawned.pid);
  const replicaPort = Number(spawned.port);
  assert.ok(isAlive(replicaPid));
  const [w0, w1] = await connectionsOnEveryWorker(gw, gw.origin, 2, 2);
  open.push(...w0!, ...w1!);
  const slow = (c: WorkerConnection) =>
    c.client
      .request({ path: '/api/v1/services/svc/request/slow?ms=1500', method: 'POST', headers: AUTH, body: `via ${c.worker}` })
      .then(async (res) => ({ status: res.statusCode, body: (await res.body.json()) as { body: string } }));
  const inflight = [slow(w0![0]!), slow(w1![0]!)];
  await eventually(async () => {
    const res = await fetch(`http://127.0.0.1:${replicaPort}/stats`);
    return ((await res.json()) as { inflight: number }).inflight === 2;
  }, 10_000, 'both slow requests to reach the replica');

  gw.child.kill('SIGTERM');
  await eventually(() => [0, 1].every((w) => gw!.logs.some((l) => l.msg === 'worker draining' && l.worker === w)), 10_000, 'both workers to drain');
  // A new request on an open connection of each worker is refused while the drain goes on.
  for (const c of [w0![1]!, w1![1]!]) {
    const res = await c.client.request({ path: '/api/v1/services/svc/request/echo', method: 'POST', headers: AUTH, body: 'late' });
    await res.body.dump();
    assert.equal(res.statusCode, 503, `a request during the drain, worker ${c.worker}`);
    assert.equal(res.headers['x-sluice-error'], 'draining');
  }
  const answers = await Promise.all(inflight);
  assert.deepEqual(
    answers.map((a) => [a.status, a.body.body]),
    [
      [200, 'via 0'],
      [200, 'via 1'],
    ],
    'the request in flight on each worker finished',
  );
  assert.equal(await gw.exited, 0, gw.output().slice(-2000));
  assert.ok([0, 1].every((w) => gw!.logs.some((l) => l.msg === 'worker drained' && l.worker === w)));
  await eventually(() => !isAlive(replicaPid), 5_000, 'the replica process to be gone');
});
