// Through a router a request is its service's (docs/api.md#routers): the OpenAI SDK's streamed
// answers, the service's queue with the router token's priority, Expect: 100-continue, and the
// router token's limits. Black-box: real replicas, the real gateway on port 0.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startModelServer, type ModelServer } from '../../examples/model-server.js';
import { sha256Hex } from '../../src/cli/token.js';
import { metric, secret, startTestGateway, TEST_TOKEN, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const LOW = secret('slc_router_low_priority_token_0000000000000000000');
const HIGH = secret('slc_router_high_priority_token_111111111111111111');
const LIMITED = secret('slc_router_limited_token_22222222222222222222222');

describe('a router in front of a model server and a one-at-a-time service', () => {
  let model: ModelServer;
  let slow: TestReplica;
  /** The bodies of the one-at-a-time replica's requests, in the order it received them. */
  const order: string[] = [];
  let releaseHold: () => void = () => undefined;
  let releaseSecond: () => void = () => undefined;
  let tg: TestGateway;
  const url = (path: string): string => tg.url(path, 'llm');

  before(async () => {
    model = await startModelServer({ port: 0, tokenDelayMs: 5 });
    const held = new Promise<void>((resolve) => (releaseHold = resolve));
    const second = new Promise<void>((resolve) => (releaseSecond = resolve));
    slow = await startReplica(async (req, res) => {
      const body = (await readBody(req)).toString();
      order.push(JSON.parse(body).tag as string);
      if (req.url === '/hold') await held;
      if (req.url === '/hold-second') await second;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true, body }));
    });
    tg = await startTestGateway(
      [
        { slug: 'demo', tokens: [{ name: 'svc', sha256: TEST_TOKEN_SHA256 }], models: ['demo-model'], replicas: { urls: [model.url] } },
        { slug: 'single', tokens: [{ name: 'svc', sha256: TEST_TOKEN_SHA256 }], models: ['single-model'], replicas: { urls: [slow.url], concurrency: 1 } },
      ],
      {
        routers: [
          {
            slug: 'llm',
            tokens: [
              { name: 'low', sha256: sha256Hex(LOW), priority: 0 },
              { name: 'high', sha256: sha256Hex(HIGH), priority: 10 },
              { name: 'limited', sha256: sha256Hex(LIMITED), limits: { concurrent: 1 } },
            ],
          },
        ],
      },
    );
  });

  after(async () => {
    releaseHold();
    releaseSecond();
    await tg?.close();
    await model?.close();
    await slow?.close();
  });

  test('the OpenAI SDK streams a chat completion through the router, delta by delta', async () => {
    const client = new OpenAI({ baseURL: url('/v1'), apiKey: LOW, maxRetries: 0, timeout: 20_000 });
    const stream = await client.chat.completions.create({ model: 'demo-model', messages: [{ role: 'user', content: 'hello routed gateway' }], stream: true });
    const deltas: string[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas.push(chunk.choices[0].delta.content);
    assert.deepEqual(deltas, ['You', ' said:', ' hello', ' routed', ' gateway']);
    const list = await client.models.list();
    assert.deepEqual(
      list.data.map((m) => m.id),
      ['demo-model', 'single-model'],
    );
    await assert.rejects(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.code, 'model_not_found');
      return true;
    });
  });

  test('routed requests wait in the service\'s queue and leave it by the router token\'s priority', async () => {
    const post = (path: string, token: string, tag: string, extra: Record<string, string> = {}): Promise<Response> =>
      fetch(url(path), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...extra }, body: JSON.stringify({ model: 'single-model', tag }) });
    // The service's own token takes its one place...
    const first = fetch(tg.url('/hold', 'single'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}` }, body: JSON.stringify({ tag: 'first' }) });
    await eventually(() => order.length === 1, 10_000, 'the first request at the replica');
    // ...then the router's: low first, high second, and a high one that lowers itself.
    const low = post('/x', LOW, 'low');
    await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="single",priority="0"}')) === 1, 10_000, 'low queued');
    const lowered = post('/x', HIGH, 'lowered', { 'x-sluice-priority': '-1' });
    await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="single",priority="-1"}')) === 1, 10_000, 'lowered queued');
    const high = post('/x', HIGH, 'high');
    await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="single",priority="10"}')) === 1, 10_000, 'high queued');
    releaseHold();
    for (const r of await Promise.all([first, low, lowered, high])) {
      assert.equal(r.status, 200);
      await r.text();
    }
    assert.deepEqual(order, ['first', 'high', 'low', 'lowered']);
  });

  test('a router token\'s limits hold across its requests: concurrent 1 refuses a second at once with 429', async () => {
    const post = (path: string, model: string): Promise<Response> =>
      fetch(url(path), { method: 'POST', headers: { authorization: `Bearer ${LIMITED}`, 'content-type': 'application/json' }, body: JSON.stringify({ model, tag: 'limited' }) });
    const held = order.length;
    const first = post('/hold-second', 'single-model');
    await eventually(() => order.length === held + 1, 10_000, 'the limited token\'s first request at the replica');
    const second = await post('/x', 'demo-model');
    assert.equal(second.status, 429);
    assert.equal(second.headers.get('x-sluice-error'), 'rate_limited');
    await second.text();
    releaseSecond();
    assert.equal((await first).status, 200);
    const third = await post('/x', 'single-model');
    assert.equal(third.status, 200);
    await third.text();
  });

  test('Expect: 100-continue is answered, then the body is routed', async () => {
    const path = new URL(url('/v1/chat/completions')).pathname;
    const body = JSON.stringify({ model: 'demo-model', messages: [{ role: 'user', content: 'continue please' }] });
    const socket = connect({ port: tg.port, host: '127.0.0.1' });
    let text = '';
    const got = (what: RegExp): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => {
          if (what.test(text)) resolve();
          else socket.once('data', check);
        };
        check();
      });
    socket.on('data', (b: Buffer) => {
      text += b.toString('utf8');
    });
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${LOW}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`);
    await got(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
    socket.write(body);
    await new Promise((resolve) => socket.once('close', resolve));
    assert.match(text, /HTTP\/1\.1 200 OK/);
    assert.match(text, /You said: continue please/);
  });
});
