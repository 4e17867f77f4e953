// The message of a `429 rate_limited` names the limit in words a person reads (docs/api.md#limits-per-caller):
// "(1 request at once)", "(1 request per minute)", "(1 token per minute)" for a limit of one,
// "(2 requests per minute)" for more. Black-box: the real gateway and a real replica that holds a
// request while the test needs a place taken.
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startHoldingReplica, type TestReplica } from '../helpers/replica.js';
import { eventually, within } from '../helpers/wait.js';

let replica: TestReplica;
const held: ServerResponse[] = [];
const gateways: TestGateway[] = [];

before(async () => {
  replica = await startHoldingReplica(held, { usage: { prompt_tokens: 10, completion_tokens: 50, total_tokens: 60 } });
});

after(async () => {
  for (const res of held) res.end('{}');
  for (const tg of gateways) await tg.close();
  await replica.close();
});

async function gateway(limits: Record<string, unknown>): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, { limits }), { workers: 1 });
  gateways.push(tg);
  return tg;
}

async function post(tg: TestGateway, path = '/x'): Promise<{ status: number; message: string }> {
  const res = await request(tg.url(path), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"max_tokens":1}' });
  const text = await res.body.text();
  return { status: res.statusCode, message: res.statusCode === 429 ? (JSON.parse(text) as { error: { message: string } }).error.message : '' };
}

test('a limit of one is "1 request" or "1 token"; more are plural', async () => {
  const perMinute = await gateway({ requestsPerMinute: 1 });
  assert.equal((await post(perMinute)).status, 200);
  assert.match((await post(perMinute)).message, /^The limit requestsPerMinute of token "test" \(1 request per minute\) is reached; retry in \d+ s\.$/);

  const two = await gateway({ requestsPerMinute: 2 });
  for (let i = 0; i < 2; i++) assert.equal((await post(two)).status, 200);
  assert.match((await post(two)).message, /\(2 requests per minute\)/);

  const tokens = await gateway({ tokensPerMinute: 1 });
  assert.equal((await post(tokens)).status, 200);
  assert.match((await post(tokens)).message, /^The limit tokensPerMinute of token "test" \(1 token per minute\) is reached/);

  const once = await gateway({ concurrent: 1 });
  const first = post(once, '/hold');
  await eventually(() => held.length === 1, 10_000, 'the first request at the replica');
  assert.match((await post(once)).message, /^The limit concurrent of token "test" \(1 request at once\) is reached/);
  held.shift()!.end('{}');
  assert.equal((await within(first, 10_000, 'the held answer')).status, 200);
});
