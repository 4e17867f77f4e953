// Repeated authentication failures from one address: after 20 within a minute, that address gets
// 429 too_many_requests with Retry-After, whatever it presents, and never reaches the replica; with
// two workers the failures through each count together (10 through each make 20).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';

let replica: TestReplica;
const gateways: TestGateway[] = [];
const open: WorkerConnection[] = [];

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('ok');
  });
});

after(async () => {
  for (const c of open) await c.client.close();
  for (const tg of gateways) await tg.close();
  await replica.close();
});

for (const workers of [1, 2]) {
  test(`workers: ${workers} — 20 failed attempts, then 429 with Retry-After even for the right token, on every worker`, async () => {
    const tg = await startTestGateway(rawService({ urls: [replica.url] }), { workers });
    gateways.push(tg);
    const byWorker = await connectionsOnEveryWorker(tg, tg.origin, workers, 1);
    const conns = byWorker.map((list) => list[0]!);
    open.push(...conns);
    const path = new URL(tg.url('/x')).pathname;
    const send = (c: WorkerConnection, authorization: string) =>
      c.client.request({ path, method: 'POST', headers: { authorization }, body: 'x' });

    const ok = await send(conns[0]!, AUTH.authorization);
    assert.equal(ok.statusCode, 200);
    await ok.body.dump();
    for (let i = 0; i < 20; i++) {
      const res = await send(conns[i % workers]!, `Bearer wrong${i}`);
      assert.equal(res.statusCode, 401, `attempt ${i + 1} is an ordinary 401`);
      await res.body.dump();
    }
    const seen = replica.seen.length;
    for (const c of conns) {
      for (const authorization of ['Bearer wrong-again', AUTH.authorization]) {
        const res = await send(c, authorization);
        assert.equal(res.statusCode, 429, `worker ${c.worker} refuses the address`);
        assert.equal(res.headers['x-sluice-error'], 'too_many_requests');
        const retryAfter = Number(res.headers['retry-after']);
        assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
        assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'too_many_requests');
      }
    }
    assert.equal(replica.seen.length, seen, 'a blocked address reaches no replica');
  });
}
