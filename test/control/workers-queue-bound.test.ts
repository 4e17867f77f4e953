// workers: 2 — queue.maxRequests bounds the requests waiting in the whole process: with 4 queued
// (two through each worker), every further request gets 503 queue_full, whichever worker it
// reaches, and no more; the 4 are served once the replica is ready.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { recordFile } from '../helpers/launched.js';
import { connectionsOnEveryWorker, GATE_REPLICA, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

let tg: TestGateway | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  await tg?.close();
});

test('workers: 2 — the queue bound holds across workers', async () => {
  const gate = recordFile(); // a fresh path: the replica reports ready once it exists
  tg = await startTestGateway(
    rawService({ command: [process.execPath, GATE_REPLICA], env: { HEALTH_GATE_FILE: gate }, readyPath: '/health', max: 1 }, { queue: { maxRequests: 4 } }),
    { workers: 2 },
  );
  const [w0, w1] = await connectionsOnEveryWorker(tg, tg.origin, 2, 4);
  open.push(...w0!, ...w1!);
  const path = new URL(tg.url('/echo')).pathname;
  const send = (c: WorkerConnection) =>
    c.client.request({ path, method: 'POST', headers: AUTH, body: 'x' }).then(async (res) => ({
      status: res.statusCode,
      code: res.headers['x-sluice-error'],
      retryAfter: res.headers['retry-after'],
      body: await res.body.text(),
    }));

  const queued = [send(w0![0]!), send(w1![0]!), send(w0![1]!), send(w1![1]!)];
  await eventually(async () => (await metric(tg!, 'sluice_queue_depth{service="svc",priority="0"}')) === 4, 10_000, 'four queued');

  const refused = await Promise.all([send(w0![2]!), send(w1![2]!), send(w0![3]!), send(w1![3]!)]);
  for (const answer of refused) {
    assert.equal(answer.status, 503);
    assert.equal(answer.code, 'queue_full');
    assert.equal(answer.retryAfter, '1');
  }
  assert.equal(await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}'), 4, 'still four queued, no more');

  writeFileSync(gate, 'ready');
  for (const answer of await Promise.all(queued)) assert.equal(answer.status, 200);
  assert.equal(await metric(tg, 'sluice_requests_total{service="svc",status="503",outcome="queue_full"}'), 4);
  assert.equal(await metric(tg, 'sluice_requests_total{service="svc",status="200",outcome="ok"}'), 4);
});
