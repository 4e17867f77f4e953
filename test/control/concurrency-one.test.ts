// concurrency 1, max 1, with one worker and with two: the replica never sees two requests at once
// while six wait (with two workers, three queued through each); when it frees up, the request that
// has waited longest, whichever worker it came through, goes first: the replica sees them in
// arrival order. (Their answers may reach the test in another order: a replica's slot is free once
// its answer is complete at the gateway, before the caller has read it.)
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { connectionsOnEveryWorker, GATE_REPLICA, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const gateways: TestGateway[] = [];
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  for (const tg of gateways) await tg.close();
});

for (const workers of [1, 2]) {
  test(`workers: ${workers} — concurrency 1 holds gateway-wide and the queue is one FIFO across workers`, async () => {
    const tg = await startTestGateway(rawService({ command: [process.execPath, GATE_REPLICA], readyPath: '/health', max: 1, concurrency: 1 }), { workers });
    gateways.push(tg);
    // Seven connections taken in turn from each worker.
    const byWorker = await connectionsOnEveryWorker(tg, tg.origin, workers, 8 / workers);
    const conns = Array.from({ length: 7 }, (_, i) => byWorker[i % workers]![Math.floor(i / workers)]!);
    open.push(...byWorker.flat());
    const path = new URL(tg.url('/held')).pathname;
    const send = (c: WorkerConnection, body: string) =>
      c.client.request({ path, method: 'POST', headers: AUTH, body }).then(async (res) => ({ status: res.statusCode, body: (await res.body.json()) as { body: string } }));

    // The first request starts the replica and holds its one slot.
    const first = send(conns[0]!, 'first');
    await eventually(() => tg.logs.some((l) => l.msg === 'replica process spawned'), 10_000, 'the replica to start');
    const replicaPort = Number(tg.logs.find((l) => l.msg === 'replica process spawned')!.port);
    const stats = async () => (await (await request(`http://127.0.0.1:${replicaPort}/stats`)).body.json()) as { inflight: number; maxInflight: number; total: number; bodies: string[] };
    await eventually(async () => (await stats().catch(() => ({ inflight: 0 }))).inflight === 1, 10_000, 'the first request to reach the replica');

    // Six more, alternating workers, each queued before the next is sent.
    const order = conns.slice(1);
    const waiting: ReturnType<typeof send>[] = [];
    for (let i = 0; i < order.length; i++) {
      const c = order[i]!;
      waiting.push(send(c, `waiter ${i} via worker ${c.worker}`));
      // Sent one by one: each is in the queue before the next leaves the test.
      await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}')) === i + 1, 10_000, `waiter ${i} queued`);
    }
    assert.equal(await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}'), 6, 'six wait, through every worker');
    assert.equal((await stats()).inflight, 1, 'the replica has one request while six wait');

    await request(`http://127.0.0.1:${replicaPort}/open`).then((res) => res.body.dump());
    const answers = [await first, ...(await Promise.all(waiting))];
    for (const answer of answers) assert.equal(answer.status, 200);
    const final = await stats();
    assert.equal(final.total, 7);
    assert.equal(final.maxInflight, 1, 'the replica never saw two requests at once');
    assert.deepEqual(
      final.bodies,
      ['first', ...order.map((c, i) => `waiter ${i} via worker ${c.worker}`)],
      'served in arrival order across workers',
    );
  });
}
