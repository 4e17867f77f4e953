// Routers (docs/api.md#routers): one endpoint, its own tokens, the service chosen by the JSON
// body's top-level "model"; the request is then that service's, body unchanged. Black-box: real
// replicas that report what they received, the real gateway on port 0.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { parseConfig } from '../../src/config/load.js';
import { AUTH, secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { RECORDING_REPLICA } from '../helpers/launched.js';
import { eventually } from '../helpers/wait.js';
import { writeFileSync } from 'node:fs';
import { recordFile } from '../helpers/launched.js';
import { GATE_REPLICA } from '../helpers/workers.js';

const ROUTER_TOKEN = secret('slc_router_token_for_the_router_tests_0123456789');
const ROUTER_AUTH = { authorization: `Bearer ${ROUTER_TOKEN}` };

/** A replica that answers what it received: its name, the path, the body's size and sha256, its model. */
async function reportingReplica(name: string): Promise<TestReplica> {
  return startReplica(async (req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of req) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ replica: name, path: req.url, bytes, sha256: hash.digest('hex'), length: req.headers['content-length'] ?? null, chunked: req.headers['transfer-encoding'] ?? null, tag: req.headers['x-tag'] ?? null }));
  });
}

function sha256(b: Buffer | string): string {
  return createHash('sha256').update(b).digest('hex');
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function post(url: string, body: string | Buffer, headers: Record<string, string> = ROUTER_AUTH): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** A chunked POST (node:http, no Content-Length), in the given pieces. */
function postChunked(url: string, pieces: Buffer[], headers: Record<string, string> = ROUTER_AUTH): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: new Headers(res.headers as Record<string, string>), text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const p of pieces) req.write(p);
    req.end();
  });
}

describe('a router in front of two static services and a launched one', () => {
  let chat: TestReplica;
  let coder: TestReplica;
  let tg: TestGateway;
  let routerUrl: (path: string) => string;
  let raw: Record<string, unknown>;

  before(async () => {
    chat = await reportingReplica('chat');
    coder = await reportingReplica('coder');
    raw = {
      services: [
        { slug: 'chat', tokens: [{ name: 'chat-caller', sha256: TEST_TOKEN_SHA256 }], models: ['llama-3.1-8b', 'qwen-7b'], forwardHeaders: ['x-tag'], replicas: { urls: [chat.url] } },
        { slug: 'coder', tokens: [{ name: 'coder-caller', sha256: TEST_TOKEN_SHA256 }], models: ['coder-7b'], replicas: { urls: [coder.url] } },
        { slug: 'tiny', tokens: [{ name: 'tiny-caller', sha256: TEST_TOKEN_SHA256 }], models: ['tiny-model'], maxRequestBytes: 100, replicas: { urls: [coder.url] } },
        {
          slug: 'sleepy',
          tokens: [{ name: 'sleepy-caller', sha256: TEST_TOKEN_SHA256 }],
          models: ['sleepy-1b'],
          replicas: { command: [process.execPath, RECORDING_REPLICA], readyPath: '/health' },
        },
      ],
      routers: [
        { slug: 'models', tokens: [{ name: 'router-caller', sha256: sha256Hex(ROUTER_TOKEN) }] },
        { slug: 'coding', tokens: [{ name: 'router-caller', sha256: sha256Hex(ROUTER_TOKEN) }], services: ['coder'] },
      ],
    };
    tg = await startTestGateway(raw.services as never, { routers: raw.routers });
    routerUrl = (path) => tg.url(path, 'models');
  });

  after(async () => {
    await tg?.close();
    await chat?.close();
    await coder?.close();
  });

  test('routes by the body\'s model to the service that serves it, body unchanged', async () => {
    const a = await post(routerUrl('/v1/chat/completions'), JSON.stringify({ model: 'qwen-7b', messages: [] }));
    assert.equal(a.status, 200, a.text);
    assert.equal(JSON.parse(a.text).replica, 'chat');
    assert.equal(JSON.parse(a.text).path, '/v1/chat/completions');
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], model: 'coder-7b' });
    const b = await post(routerUrl('/v1/completions'), body);
    assert.equal(b.status, 200, b.text);
    const seen = JSON.parse(b.text) as Record<string, unknown>;
    assert.equal(seen['replica'], 'coder');
    assert.equal(seen['sha256'], sha256(body));
    assert.equal(seen['length'], String(Buffer.byteLength(body)));
    const id = b.headers.get('x-request-id');
    await eventually(() => tg.logs.some((l) => l['reqId'] === id && l['msg'] === 'request'), 10_000, 'the access line');
    const line = tg.logs.find((l) => l['reqId'] === id && l['msg'] === 'request')!;
    assert.equal(line['service'], 'coder');
    assert.equal(line['router'], 'models');
    assert.equal(line['tokenName'], 'router-caller');
  });

  test('an unknown model is 404 model_not_found in OpenAI\'s shape; nothing reaches a replica', async () => {
    const before = chat.seen.length + coder.seen.length;
    const a = await post(routerUrl('/v1/chat/completions'), JSON.stringify({ model: 'gpt-9', messages: [] }));
    assert.equal(a.status, 404);
    assert.equal(a.headers.get('x-sluice-error'), 'model_not_found');
    const body = JSON.parse(a.text) as { error: Record<string, unknown> };
    assert.deepEqual(Object.keys(body.error), ['message', 'type', 'code']);
    assert.equal(body.error['type'], 'invalid_request_error');
    assert.equal(body.error['code'], 'model_not_found');
    assert.match(String(body.error['message']), /gpt-9/);
    assert.equal(chat.seen.length + coder.seen.length, before);
  });

  test('no model, a model that is not a string, a JSON array, or not JSON: 400 bad_request', async () => {
    for (const body of ['{"messages":[]}', '{"model":7}', '[{"model":"qwen-7b"}]', 'model=qwen-7b', '{"model":"qwen-7b"', '']) {
      const a = await post(routerUrl('/v1/chat/completions'), body);
      assert.equal(a.status, 400, `${body}: ${a.text}`);
      assert.equal(a.headers.get('x-sluice-error'), 'bad_request');
      assert.equal((JSON.parse(a.text) as { error: { code: string } }).error.code, 'bad_request');
    }
  });

  test('a chunked body is routed and reaches the replica whole', async () => {
    const body = Buffer.from(JSON.stringify({ model: 'llama-3.1-8b', prompt: 'x'.repeat(50_000) }));
    const a = await postChunked(routerUrl('/v1/completions'), [body.subarray(0, 7), body.subarray(7, 30_000), body.subarray(30_000)]);
    assert.equal(a.status, 200, a.text);
    const seen = JSON.parse(a.text) as Record<string, unknown>;
    assert.equal(seen['replica'], 'chat');
    assert.equal(seen['sha256'], sha256(body));
    assert.equal(seen['length'], String(body.length), 'held whole: sent with Content-Length');
    assert.equal(seen['chunked'], null);
  });

  test('a body over 1 MiB that names its model early is relayed whole; one without a model in its first MiB is 400', async () => {
    const big = Buffer.from(JSON.stringify({ model: 'coder-7b', prompt: 'y'.repeat(3 * 1024 * 1024) }));
    const a = await post(routerUrl('/v1/completions'), big);
    assert.equal(a.status, 200, a.text);
    const seen = JSON.parse(a.text) as Record<string, unknown>;
    assert.equal(seen['replica'], 'coder');
    assert.equal(seen['bytes'], big.length);
    assert.equal(seen['sha256'], sha256(big));
    const chunked = await postChunked(routerUrl('/v1/completions'), [big.subarray(0, 100), big.subarray(100, 2_000_000), big.subarray(2_000_000)]);
    assert.equal(chunked.status, 200, chunked.text);
    assert.equal((JSON.parse(chunked.text) as Record<string, unknown>)['sha256'], sha256(big));
    assert.equal((JSON.parse(chunked.text) as Record<string, unknown>)['chunked'], 'chunked', 'past the first MiB it streams on chunked');
    const late = Buffer.from(JSON.stringify({ prompt: 'z'.repeat(2 * 1024 * 1024), model: 'coder-7b' }));
    const b = await post(routerUrl('/v1/completions'), late);
    assert.equal(b.status, 400, b.text);
    assert.equal(b.headers.get('x-sluice-error'), 'bad_request');
  });

  test('a router\'s token is refused on a service, a service\'s token on the router', async () => {
    const onService = await post(tg.url('/v1/completions', 'chat'), JSON.stringify({ model: 'qwen-7b' }), ROUTER_AUTH);
    assert.equal(onService.status, 401);
    const onRouter = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'qwen-7b' }), AUTH);
    assert.equal(onRouter.status, 401);
    const none = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'qwen-7b' }), {});
    assert.equal(none.status, 401);
    const models = await fetch(routerUrl('/v1/models'), { headers: AUTH });
    assert.equal(models.status, 401);
    await models.text();
  });

  test('only the headers the chosen service forwards reach its replica', async () => {
    const a = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'qwen-7b' }), { ...ROUTER_AUTH, 'x-tag': 'kept' });
    assert.equal((JSON.parse(a.text) as Record<string, unknown>)['tag'], 'kept');
    const b = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'coder-7b' }), { ...ROUTER_AUTH, 'x-tag': 'dropped' });
    assert.equal((JSON.parse(b.text) as Record<string, unknown>)['tag'], null);
  });

  test('GET /v1/models lists every model with its service and state, the cold launched one included', async () => {
    const res = await fetch(routerUrl('/v1/models'), { headers: ROUTER_AUTH });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const list = (await res.json()) as { object: string; data: Record<string, unknown>[] };
    assert.equal(list.object, 'list');
    assert.deepEqual(
      list.data.map((m) => [m['id'], m['object'], m['owned_by'], m['service']]),
      [
        ['llama-3.1-8b', 'model', 'sluice', 'chat'],
        ['qwen-7b', 'model', 'sluice', 'chat'],
        ['coder-7b', 'model', 'sluice', 'coder'],
        ['tiny-model', 'model', 'sluice', 'tiny'],
        ['sleepy-1b', 'model', 'sluice', 'sleepy'],
      ],
    );
    const state = (id: string): unknown => list.data.find((m) => m['id'] === id)!['state'];
    assert.equal(state('qwen-7b'), 'ready');
    assert.equal(state('coder-7b'), 'ready');
    assert.equal(state('sleepy-1b'), 'cold');
    const other = await fetch(routerUrl('/v1/other'), { headers: ROUTER_AUTH });
    assert.equal(other.status, 405);
    await other.text();
  });

  test('the chosen service\'s maxRequestBytes applies: 413 once the model is known; a router limited to some services knows only their models', async () => {
    const before = coder.seen.length;
    const a = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'tiny-model', prompt: 'p'.repeat(200) }));
    assert.equal(a.status, 413, a.text);
    assert.equal(a.headers.get('x-sluice-error'), 'payload_too_large');
    const fits = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'tiny-model' }));
    assert.equal(fits.status, 200, fits.text);
    assert.equal(coder.seen.length, before + 1, 'only the one that fits reached the replica');
    const coding = (path: string): string => tg.url(path, 'coding');
    assert.equal((await post(coding('/v1/completions'), JSON.stringify({ model: 'coder-7b' }))).status, 200);
    assert.equal((await post(coding('/v1/completions'), JSON.stringify({ model: 'qwen-7b' }))).status, 404);
    const list = (await (await fetch(coding('/v1/models'), { headers: ROUTER_AUTH })).json()) as { data: { id: string }[] };
    assert.deepEqual(list.data.map((m) => m.id), ['coder-7b']);
  });

  test('a body broken off while the router holds it reaches no replica: client_closed', async () => {
    const before = chat.seen.length + coder.seen.length;
    const path = new URL(routerUrl('/v1/broken')).pathname;
    const socket = connect({ port: tg.port, host: '127.0.0.1' });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ROUTER_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"model":"qwen-7b","prompt":"`);
    // A request behind it on another connection: by its answer the gateway has read the first piece.
    assert.equal((await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'coder-7b' }))).status, 200);
    socket.destroy();
    await eventually(() => tg.logs.some((l) => l['msg'] === 'request' && l['path'] === '/v1/broken'), 10_000, 'the access line of the broken request');
    const line = tg.logs.find((l) => l['msg'] === 'request' && l['path'] === '/v1/broken')!;
    assert.equal(line['outcome'], 'client_closed');
    assert.equal(line['router'], 'models');
    assert.equal(chat.seen.length + coder.seen.length, before + 1, 'only the other request reached a replica');
  });

  test('a reload adds a model to a running service: the router routes it and lists it', async () => {
    const next = structuredClone(raw) as { services: { models: string[] }[] };
    next.services[1]!.models.push('coder-34b');
    const before = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'coder-34b' }));
    assert.equal(before.status, 404);
    tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, ...next }));
    const a = await post(routerUrl('/v1/completions'), JSON.stringify({ model: 'coder-34b' }));
    assert.equal(a.status, 200, a.text);
    assert.equal((JSON.parse(a.text) as Record<string, unknown>)['replica'], 'coder');
    const list = (await (await fetch(routerUrl('/v1/models'), { headers: ROUTER_AUTH })).json()) as { data: { id: string }[] };
    assert.ok(list.data.some((m) => m.id === 'coder-34b'));
  });
});

describe('a router in front of a cold launched service', () => {
  let tg: TestGateway;
  const gate = recordFile(); // the replica reports ready once this file exists

  before(async () => {
    tg = await startTestGateway(
      [
        {
          slug: 'cold',
          tokens: [{ name: 'svc', sha256: TEST_TOKEN_SHA256 }],
          models: ['cold-model'],
          queue: { keepAliveMs: 100 },
          replicas: { command: [process.execPath, GATE_REPLICA], env: { HEALTH_GATE_FILE: gate }, readyPath: '/health', max: 1 },
        },
      ],
      { routers: [{ slug: 'models', tokens: [{ name: 'router-caller', sha256: sha256Hex(ROUTER_TOKEN) }] }] },
    );
  });

  after(async () => {
    await tg?.close();
  });

  async function stateOf(model: string): Promise<unknown> {
    const list = (await (await fetch(tg.url('/v1/models', 'models'), { headers: ROUTER_AUTH })).json()) as { data: Record<string, unknown>[] };
    return list.data.find((m) => m['id'] === model)?.['state'];
  }

  test('a routed request starts the service and is kept alive as its own; the list says cold, starting, ready', async () => {
    assert.equal(await stateOf('cold-model'), 'cold');
    const res = await fetch(tg.url('/echo', 'models'), {
      method: 'POST',
      headers: { ...ROUTER_AUTH, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ model: 'cold-model', stream: true }),
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let first = '';
    while (!first.includes('\n\n')) first += new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /^: waiting for a replica/);
    assert.equal(await stateOf('cold-model'), 'starting');
    writeFileSync(gate, '');
    while (!(await reader.read()).done);
    await eventually(async () => (await stateOf('cold-model')) === 'ready', 10_000, 'the model to be ready');
    await eventually(() => tg.logs.some((l) => l['msg'] === 'request' && l['router'] === 'models'), 10_000, 'the access line');
    const line = tg.logs.find((l) => l['msg'] === 'request' && l['router'] === 'models')!;
    assert.equal(line['service'], 'cold');
    assert.equal(line['keptAlive'], true);
    assert.ok(Number(line['queuedMs']) > 0, 'it waited in the service\'s queue');
  });
});
