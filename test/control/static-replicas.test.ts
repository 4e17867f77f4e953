// Static replicas (replicas.urls) through the gateway: with one of two down every request succeeds
// on the other (a refused connection is retried once, then the replica leaves the rotation); with
// both down the caller gets 502 upstream_unavailable.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closedPort, readBody, startReplica, type TestReplica } from '../helpers/replica.js';

let live: TestReplica;
let tg: TestGateway;
let downA: number;
let downB: number;

before(async () => {
  live = await startReplica(async (req, res) => {
    const body = await readBody(req);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`live:${body.toString()}`);
  });
  downA = await closedPort();
  downB = await closedPort();
  tg = await startTestGateway([
    rawService({ urls: [`http://127.0.0.1:${downA}`, live.url] }, { slug: 'half' }),
    rawService({ urls: [`http://127.0.0.1:${downA}`, `http://127.0.0.1:${downB}`] }, { slug: 'none' }),
  ]);
});

after(async () => {
  await tg.close();
  await live.close();
});

test('with one of two replicas down, every request succeeds on the other', async () => {
  for (let i = 0; i < 20; i++) {
    const res = await request(tg.url('/x', 'half'), { method: 'POST', headers: AUTH, body: `n${i}` });
    assert.equal(res.statusCode, 200, `request ${i}`);
    assert.equal(await res.body.text(), `live:n${i}`);
  }
  const concurrent = await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      const res = await request(tg.url('/x', 'half'), { method: 'POST', headers: AUTH, body: `c${i}` });
      return { status: res.statusCode, text: await res.body.text() };
    }),
  );
  concurrent.forEach((answer, i) => assert.deepEqual(answer, { status: 200, text: `live:c${i}` }));
  assert.equal(live.seen.length, 40, 'each request reached the live replica exactly once');
});

test('with both replicas down: 502 upstream_unavailable', async () => {
  for (let i = 0; i < 3; i++) {
    const res = await request(tg.url('/x', 'none'), { method: 'POST', headers: AUTH, body: 'x' });
    assert.equal(res.statusCode, 502);
    assert.equal(res.headers['x-sluice-error'], 'upstream_unavailable');
    const body = (await res.body.json()) as { error: { code: string } };
    assert.equal(body.error.code, 'upstream_unavailable');
  }
});
