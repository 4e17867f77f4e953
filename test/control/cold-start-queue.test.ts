// The queue in front of a cold service, through the gateway: bounded length (503 queue_full; the
// bound holds for the whole process, with one worker and with two), bounded wait (503
// no_replica), a failed start (every queued request answered promptly, the next one tries again),
// and a caller that leaves while queued (it never reaches a replica).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { RECORDING_REPLICA, recordFile, recorded, transitions } from '../helpers/launched.js';
import { eventually } from '../helpers/wait.js';
import { connectionsOnEveryWorker, GATE_REPLICA, type WorkerConnection } from '../helpers/workers.js';

const gateways: TestGateway[] = [];
const open: WorkerConnection[] = [];
after(async () => {
  for (const c of open) await c.client.close();
  await Promise.all(gateways.map((g) => g.close()));
});

async function gatewayFor(replicas: Record<string, unknown>, queue: Record<string, unknown>): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ command: [process.execPath, RECORDING_REPLICA], readyPath: '/health', ...replicas }, { queue }));
  gateways.push(tg);
  return tg;
}

async function post(tg: TestGateway, path: string, body = 'x'): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

for (const workers of [1, 2]) {
  test(`workers: ${workers} — over queue.maxRequests, counted across the process: 503 queue_full with Retry-After, whichever worker; the queued ones are served`, async () => {
    const gate = recordFile(); // a fresh path: the replica reports ready once it exists
    const tg = await startTestGateway(
      rawService({ command: [process.execPath, GATE_REPLICA], env: { HEALTH_GATE_FILE: gate }, readyPath: '/health', max: 1 }, { queue: { maxRequests: 4 } }),
      { workers },
    );
    gateways.push(tg);
    // Eight connections taken in turn from each worker: the first four queue, the next four are refused.
    const byWorker = await connectionsOnEveryWorker(tg, tg.origin, workers, 8 / workers);
    const conns = Array.from({ length: 8 }, (_, i) => byWorker[i % workers]![Math.floor(i / workers)]!);
    open.push(...conns);
    const path = new URL(tg.url('/echo')).pathname;
    const send = (c: WorkerConnection) =>
      c.client.request({ path, method: 'POST', headers: AUTH, body: 'x' }).then(async (res) => ({
        status: res.statusCode,
        code: res.headers['x-sluice-error'],
        retryAfter: res.headers['retry-after'],
        body: await res.body.text(),
      }));

    const queued = conns.slice(0, 4).map(send);
    await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}')) === 4, 10_000, 'four queued');

    const refused = await Promise.all(conns.slice(4).map(send));
    for (const answer of refused) {
      assert.equal(answer.status, 503);
      assert.equal(answer.code, 'queue_full');
      assert.equal(JSON.parse(answer.body).error.code, 'queue_full');
      assert.equal(answer.retryAfter, '1');
    }
    assert.equal(await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}'), 4, 'still four queued, no more');

    writeFileSync(gate, 'ready');
    for (const answer of await Promise.all(queued)) assert.equal(answer.status, 200);
    assert.equal(await metric(tg, 'sluice_requests_total{service="svc",status="503",outcome="queue_full"}'), 4);
    assert.equal(await metric(tg, 'sluice_requests_total{service="svc",status="200",outcome="ok"}'), 4);
  });
}

test('past queue.maxWaitMs: 503 no_replica with Retry-After', async () => {
  const tg = await gatewayFor({ env: { START_DELAY_MS: '5000' } }, { maxWaitMs: 300 });
  const started = Date.now();
  const answer = await post(tg, '/echo');
  assert.equal(answer.status, 503);
  assert.equal(JSON.parse(answer.text).error.code, 'no_replica');
  assert.ok(Number(answer.headers['retry-after']) >= 1);
  // A 503 at all means it expired before the replica (5 s to start) could serve it.
  const waited = Date.now() - started;
  assert.ok(waited >= 250, `answered after the 300 ms wait (${waited} ms)`);
});

test('a replica that exits at once: every queued request gets no_replica at once (not after startTimeoutMs), and the next request starts one again', async () => {
  // A start timeout no test run outlasts: answers at all mean they came when the replica exited.
  const tg = await gatewayFor({ command: [process.execPath, '-e', 'process.exit(3)'], startTimeoutMs: 600_000 }, {});
  const answers = await Promise.all(Array.from({ length: 5 }, () => post(tg, '/echo')));
  for (const answer of answers) {
    assert.equal(answer.status, 503);
    assert.equal(JSON.parse(answer.text).error.code, 'no_replica');
  }
  const startsBefore = transitions(tg.logs, 'starting').length;
  const again = await post(tg, '/echo');
  assert.equal(again.status, 503, 'the command still fails');
  assert.ok(transitions(tg.logs, 'starting').length > startsBefore, 'the later request started a replica again');
});

test('a caller that disconnects while queued never reaches the replica', async () => {
  const file = recordFile();
  const tg = await gatewayFor({ env: { START_DELAY_MS: '800', RECORD_FILE: file } }, {});
  const socket = connect(tg.port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`POST ${new URL(tg.url('/echo?who=leaver')).pathname}?who=leaver HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Length: 2\r\n\r\n{}`);
  await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.to === 'starting'), 5000, 'the cold start');
  socket.destroy();
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.outcome === 'client_closed'), 5000, 'the client_closed log line');
  // A request that stays is served once the replica is ready; by then the leaver would have gone first.
  const stayer = await post(tg, '/echo?who=stayer');
  assert.equal(stayer.status, 200);
  const lines = recorded(file);
  assert.ok(lines.some((l) => l.includes('who=stayer')));
  assert.ok(!lines.some((l) => l.includes('who=leaver')), `the leaver never reached the replica: ${lines.join('; ')}`);
});
