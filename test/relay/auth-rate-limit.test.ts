// Repeated authentication failures from one address: after 20 within a minute, that address gets
// 429 too_many_requests with Retry-After, whatever it presents, and never reaches the replica.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';

let replica: TestReplica;
let tg: TestGateway;

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('ok');
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }));
});

after(async () => {
  await tg.close();
  await replica.close();
});

test('20 failed attempts, then 429 with Retry-After even for the right token', async () => {
  const ok = await request(tg.url('/x'), { method: 'POST', headers: AUTH, body: 'x' });
  assert.equal(ok.statusCode, 200);
  await ok.body.dump();
  for (let i = 0; i < 20; i++) {
    const res = await request(tg.url('/x'), { method: 'POST', headers: { authorization: `Bearer wrong${i}` } });
    assert.equal(res.statusCode, 401, `attempt ${i + 1} is an ordinary 401`);
    await res.body.dump();
  }
  const seen = replica.seen.length;
  for (const headers of [{ authorization: 'Bearer wrong-again' }, AUTH]) {
    const res = await request(tg.url('/x'), { method: 'POST', headers, body: 'x' });
    assert.equal(res.statusCode, 429);
    assert.equal(res.headers['x-sluice-error'], 'too_many_requests');
    const retryAfter = Number(res.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'too_many_requests');
  }
  assert.equal(replica.seen.length, seen, 'a blocked address reaches no replica');
});
