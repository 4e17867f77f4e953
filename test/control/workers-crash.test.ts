// workers: 2 — a worker that dies (here made to throw by a hook that exists only with
// NODE_ENV=test and SLUICE_TEST_HOOKS=1) is logged and replaced: the replica slot it held is given
// back to the request waiting on the other worker, that request is served, and the gateway keeps
// answering on both workers.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { type CliGateway, connectionsOnEveryWorker, GATE_REPLICA, startCliGateway, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

let gw: CliGateway | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.destroy().catch(() => undefined);
  if (gw === undefined) return;
  // SIGTERM first: the drain stops the launched replica. SIGKILL only if it hangs, and then the
  // replica it started is killed here, so no process outlives the test.
  if (gw.child.exitCode === null) gw.child.kill('SIGTERM');
  const timer = setTimeout(() => gw!.child.kill('SIGKILL'), 10_000);
  await gw.exited;
  clearTimeout(timer);
  for (const line of gw.logs.filter((l) => l.msg === 'replica process spawned')) {
    try {
      process.kill(Number(line.pid), 'SIGKILL');
    } catch {
      // already gone: the drain stopped it
    }
  }
});

test('workers: 2 — a worker that dies is replaced, its slot is given back, the others keep serving', async () => {
  gw = await startCliGateway(
    {
      workers: 2,
      services: [
        {
          slug: 'svc',
          tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }],
          replicas: { command: [process.execPath, GATE_REPLICA], readyPath: '/health', min: 1, max: 1, concurrency: 1 },
        },
      ],
    },
    { NODE_ENV: 'test', SLUICE_TEST_HOOKS: '1' },
  );
  await eventually(() => gw!.logs.some((l) => l.msg === 'replica state' && l.to === 'ready'), 15_000, 'the replica to be ready');
  const replicaPort = Number(gw.logs.find((l) => l.msg === 'replica process spawned')!.port);
  const stats = async () => (await (await request(`http://127.0.0.1:${replicaPort}/stats`)).body.json()) as { inflight: number };
  const [w0, w1] = await connectionsOnEveryWorker(gw, gw.origin, 2, 2);
  open.push(...w0!, ...w1!);
  const held = (c: WorkerConnection) =>
    c.client
      .request({ path: '/api/v1/services/svc/request/held', method: 'POST', headers: AUTH, body: `via ${c.worker}` })
      .then(async (res) => ({ status: res.statusCode, body: await res.body.text() }));

  // Worker 0 holds the one slot; a request through worker 1 waits for it.
  const onDying = held(w0![0]!).catch((err: Error) => err);
  await eventually(async () => (await stats()).inflight === 1, 10_000, 'the first request to reach the replica');
  const waiting = held(w1![0]!);
  await eventually(async () => {
    const res = await w1![1]!.client.request({ path: '/metrics', method: 'GET' });
    return /^sluice_queue_depth\{service="svc",priority="0"\} 1$/m.test(await res.body.text());
  }, 10_000, 'the second request to queue');

  const crash = await w0![1]!.client.request({ path: '/__sluice_test/crash-worker', method: 'POST', body: '' });
  assert.equal(crash.statusCode, 202);
  assert.equal(await crash.body.text(), '0');
  await eventually(() => gw!.logs.some((l) => l.msg === 'worker died; replacing it' && l.worker === 0), 10_000, 'the death to be logged');
  // Closing its uWS app on the way out ends its requests, which give their slots back; what a
  // worker could not give back itself the main thread takes back from its row of the slot table.
  const died = gw.logs.find((l) => l.msg === 'worker died; replacing it')!;
  assert.equal(typeof died.slotsGivenBack, 'number');
  assert.ok(gw.logs.some((l) => l.msg === 'worker failed' && l.worker === 0), 'the worker logged why it failed');
  assert.ok((await onDying) instanceof Error, "the dead worker's caller saw its connection close");

  // The slot went to the request waiting on worker 1.
  await eventually(async () => (await stats()).inflight === 2, 10_000, 'the waiting request to reach the replica');
  await request(`http://127.0.0.1:${replicaPort}/open`).then((res) => res.body.dump());
  assert.deepEqual(await waiting, { status: 200, body: JSON.stringify({ pid: (await replicaPid()) ?? 0, body: 'via 1' }) });

  await eventually(() => gw!.logs.some((l) => l.msg === 'worker replaced' && l.worker === 0), 10_000, 'the replacement');
  const after = await connectionsOnEveryWorker(gw, gw.origin, 2, 1);
  open.push(...after.flat());
  for (const c of after.flat()) {
    const res = await c.client.request({ path: '/api/v1/services/svc/request/echo', method: 'POST', headers: AUTH, body: 'after' });
    assert.equal(res.statusCode, 200, `worker ${c.worker} answers after the replacement`);
    await res.body.dump();
  }
  assert.equal(gw.child.exitCode, null, 'the gateway process is still running');

  async function replicaPid(): Promise<number | undefined> {
    return Number(gw!.logs.find((l) => l.msg === 'replica process spawned')!.pid);
  }
});
