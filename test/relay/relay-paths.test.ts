// The three example path shapes relay status and body; the query string and percent-encoding
// pass through verbatim; `/request/` relays `/`.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { startModelServer } from '../../examples/model-server.js';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';

let model: Awaited<ReturnType<typeof startModelServer>>;
let echo: TestReplica;
let tg: TestGateway;

before(async () => {
  model = await startModelServer({ port: 0, tokenDelayMs: 0 });
  echo = await startReplica(async (req, res) => {
    const body = await readBody(req);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ method: req.method, url: req.url, body: body.toString() }));
  });
  tg = await startTestGateway([
    rawService({ urls: [model.url] }, { slug: 'model' }),
    rawService({ urls: [echo.url] }, { slug: 'echo', methods: ['POST', 'PUT'] }),
  ]);
});

after(async () => {
  await tg.close();
  await model.close();
  await echo.close();
});

test('POST /v1/completions relays the OpenAI completion', async () => {
  const res = await request(tg.url('/v1/completions', 'model'), {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo', prompt: 'hello world', max_tokens: 4 }),
  });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /application\/json/);
  const body = (await res.body.json()) as { object: string; choices: { text: string }[] };
  assert.equal(body.object, 'text_completion');
  assert.ok(body.choices[0]!.text.length > 0);
});

test('POST /v2/models/{model}/infer relays the KServe v2 answer', async () => {
  const res = await request(tg.url('/v2/models/doubler/infer', 'model'), {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'x', shape: [3], datatype: 'FP32', data: [1, 2, 3] }] }),
  });
  assert.equal(res.statusCode, 200);
  const body = (await res.body.json()) as { model_name: string; outputs: { data: number[] }[] };
  assert.equal(body.model_name, 'doubler');
  assert.ok(Array.isArray(body.outputs) && body.outputs.length > 0);
});

test('POST /predictions/{model} relays the TorchServe answer, and replica errors pass through', async () => {
  const ok = await request(tg.url('/predictions/resnet', 'model'), {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/octet-stream' },
    body: Buffer.from([1, 2, 3, 4]),
  });
  assert.equal(ok.statusCode, 200);
  const body = (await ok.body.json()) as { model: string; received_bytes: number };
  assert.equal(body.model, 'resnet');
  assert.equal(body.received_bytes, 4);

  const missing = await request(tg.url('/no/such/endpoint', 'model'), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(missing.statusCode, 404);
  assert.equal(missing.headers['x-sluice-error'], undefined, 'a replica error is relayed, not produced by Sluice');
  await missing.body.dump();
});

test('the query string and percent-encoding are forwarded verbatim', async () => {
  const path = '/v1/a%20b/caf%C3%A9/%23x?q=a%20b&x=%2F&empty=&flag';
  const res = await request(tg.url(path, 'echo'), { method: 'POST', headers: AUTH, body: 'payload' });
  assert.equal(res.statusCode, 200);
  const seen = (await res.body.json()) as { url: string; body: string; method: string };
  assert.equal(seen.url, path);
  assert.equal(seen.body, 'payload');
});

test('/request/ relays /, and other enabled methods are relayed', async () => {
  const root = await request(tg.url('/', 'echo'), { method: 'POST', headers: AUTH, body: 'x' });
  assert.equal(((await root.body.json()) as { url: string }).url, '/');
  const put = await request(tg.url('/items/1', 'echo'), { method: 'PUT', headers: AUTH, body: 'y' });
  assert.equal(put.statusCode, 200);
  assert.deepEqual(await put.body.json(), { method: 'PUT', url: '/items/1', body: 'y' });
});
