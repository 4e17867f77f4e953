// workers: 2 — sluice_requests_total counts every relayed request once, whichever worker served
// it, and /metrics answers the same sums through either worker.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

let tg: TestGateway | undefined;
let replica: TestReplica | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  await tg?.close();
  await replica?.close();
});

test('workers: 2 — every request is counted once, whichever worker served it', async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(req.url === '/missing' ? 404 : 200, { 'content-type': 'text/plain' }).end('ok');
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }), { workers: 2 });
  const [w0, w1] = await connectionsOnEveryWorker(tg, tg.origin, 2, 2);
  open.push(...w0!, ...w1!);
  const send = async (c: WorkerConnection, path: string): Promise<number> => {
    const res = await c.client.request({ path: new URL(tg!.url(path)).pathname, method: 'POST', headers: AUTH, body: 'abc' });
    await res.body.dump();
    return res.statusCode;
  };
  // 7 + 5 answered 200 and 3 + 2 answered 404, split unevenly between the workers.
  for (let i = 0; i < 7; i++) assert.equal(await send(w0![i % 2]!, '/ok'), 200);
  for (let i = 0; i < 5; i++) assert.equal(await send(w1![i % 2]!, '/ok'), 200);
  for (let i = 0; i < 3; i++) assert.equal(await send(w0![0]!, '/missing'), 404);
  for (let i = 0; i < 2; i++) assert.equal(await send(w1![1]!, '/missing'), 404);

  // Scraped through each worker: the same whole-gateway sums.
  for (const c of [w0![0]!, w1![0]!]) {
    const res = await c.client.request({ path: '/metrics', method: 'GET' });
    const text = await res.body.text();
    assert.match(text, /^sluice_requests_total\{service="svc",status="200",outcome="ok"\} 12$/m, `through worker ${c.worker}`);
    assert.match(text, /^sluice_requests_total\{service="svc",status="404",outcome="ok"\} 5$/m);
    assert.match(text, /^sluice_bytes_relayed_total\{service="svc",direction="in"\} 51$/m);
    assert.match(text, /^sluice_request_duration_seconds_count\{service="svc"\} 17$/m);
    assert.match(text, /^sluice_inflight_requests 0$/m);
  }
  // The workers post their log lines to the main thread in batches, a moment after the answers.
  await eventually(() => tg!.logs.filter((l) => l.msg === 'request').length >= 17, 10_000, 'the 17 access lines');
  const lines = tg.logs.filter((l) => l.msg === 'request');
  assert.equal(lines.filter((l) => l.worker === 0).length, 10);
  assert.equal(lines.filter((l) => l.worker === 1).length, 7);
});
