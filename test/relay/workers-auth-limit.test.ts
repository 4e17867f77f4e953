// workers: 2 — the limit on repeated authentication failures counts an address's failures on
// every worker together: 10 through each worker make 20, and then both workers answer 429.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';

let tg: TestGateway | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  await tg?.close();
});

test('workers: 2 — authentication failures from one address count across workers', async () => {
  tg = await startTestGateway(rawService({ urls: ['http://127.0.0.1:9'] }), { workers: 2 });
  const [w0, w1] = await connectionsOnEveryWorker(tg, tg.origin, 2, 1);
  open.push(...w0!, ...w1!);
  const path = new URL(tg.url('/x')).pathname;
  const send = async (c: WorkerConnection, authorization: string) => {
    const res = await c.client.request({ path, method: 'POST', headers: { authorization }, body: '' });
    await res.body.dump();
    return { status: res.statusCode, retryAfter: res.headers['retry-after'] };
  };
  for (let i = 0; i < 10; i++) {
    assert.equal((await send(w0![0]!, 'Bearer wrong-token')).status, 401);
    assert.equal((await send(w1![0]!, 'Bearer wrong-token')).status, 401);
  }
  for (const c of [w0![0]!, w1![0]!]) {
    const answer = await send(c, AUTH.authorization);
    assert.equal(answer.status, 429, `worker ${c.worker} refuses the address, even with the right token`);
    assert.ok(Number(answer.retryAfter) > 0);
  }
});
