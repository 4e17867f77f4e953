// Keys of a router scoped to models, services reachable only through routers, and what a refused
// caller is told (docs/api.md#routers): black-box, the real gateway on port 0, a real model server,
// the OpenAI Node SDK, raw sockets for bodies in separate packets.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startModelServer, type ModelServer } from '../../examples/model-server.js';
import { sha256Hex } from '../../src/cli/token.js';
import { AUTH, secret, startTestGateway, TEST_TOKEN, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { splitPost } from '../helpers/split-post.js';

const FULL = secret('slc_router_full_key_for_the_scoped_tests_0123456789');
const SCOPED = secret('slc_router_scoped_key_for_the_scoped_tests_0123456789');
const OTHER = secret('slc_some_token_nobody_has_for_the_scoped_tests_0123');
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function post(url: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

function errorOf(a: { text: string } | { body: string }): Record<string, unknown> {
  return (JSON.parse('text' in a ? a.text : a.body) as { error: Record<string, unknown> }).error;
}

describe('a router with a key scoped to models, in front of a service without tokens', () => {
  let model: ModelServer;
  let tg: TestGateway;
  const routerPath = (path: string): string => `/api/v1/services/models/request${path}`;

  before(async () => {
    model = await startModelServer({ port: 0, tokenDelayMs: 0 });
    tg = await startTestGateway(
      [
        // `chat` has tokens of its own; `hidden` has none: only the router reaches it.
        { slug: 'chat', tokens: [{ name: 'chat-caller', sha256: TEST_TOKEN_SHA256 }], models: ['llama'], replicas: { urls: [model.url] } },
        { slug: 'hidden', models: ['coder', 'embedder'], replicas: { urls: [model.url] } },
      ],
      {
        routers: [
          {
            slug: 'models',
            tokens: [
              { name: 'full', sha256: sha256Hex(FULL) },
              { name: 'scoped', sha256: sha256Hex(SCOPED), models: ['llama', 'embedder'] },
            ],
          },
        ],
      },
    );
  });

  after(async () => {
    await tg?.close();
    await model?.close();
  });

  test('a service without tokens answers through its router, and 401 on its own endpoint to every token', async () => {
    const routed = await post(tg.origin + routerPath('/v1/chat/completions'), JSON.stringify({ model: 'coder', messages: [{ role: 'user', content: 'hi' }] }), bearer(FULL));
    assert.equal(routed.status, 200, routed.text);
    assert.equal((JSON.parse(routed.text) as Record<string, unknown>)['model'], 'coder');
    const body = JSON.stringify({ model: 'coder', messages: [] });
    const none = await post(tg.url('/v1/chat/completions', 'hidden'), body, {});
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('x-sluice-error'), 'unauthorized');
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="sluice"');
    for (const token of [OTHER, TEST_TOKEN]) {
      const a = await post(tg.url('/v1/chat/completions', 'hidden'), body, bearer(token));
      assert.equal(a.status, 401, a.text);
      assert.equal(a.headers.get('www-authenticate'), 'Bearer realm="sluice", error="invalid_token"');
      assert.equal(errorOf(a)['message'], 'A valid bearer token is required.', 'as for a token nobody has');
    }
  });

  test('a router\'s token on a service, and a service\'s token on a router: 401 saying which kind it is, naming no slug', async () => {
    for (const slug of ['hidden', 'chat']) {
      const a = await post(tg.url('/v1/chat/completions', slug), JSON.stringify({ model: 'llama' }), bearer(FULL));
      assert.equal(a.status, 401, a.text);
      assert.equal(a.headers.get('x-sluice-error'), 'unauthorized');
      assert.equal(errorOf(a)['message'], "This is a router's token: send the request to the router's endpoint ({basePath}/{router}/request…), which chooses the service by the body's \"model\".");
    }
    const a = await post(tg.origin + routerPath('/v1/chat/completions'), JSON.stringify({ model: 'llama' }), AUTH);
    assert.equal(a.status, 401, a.text);
    assert.equal(errorOf(a)['message'], "This is a service's token, not a token of this router: send the request to the service's own endpoint, or use a token of the router.");
    assert.doesNotMatch(a.text, /chat-caller|"chat"/);
    const list = await fetch(tg.origin + routerPath('/v1/models'), { headers: AUTH });
    assert.equal(list.status, 401);
    assert.match(String(errorOf({ text: await list.text() })['message']), /a service's token/);
    const nobody = await post(tg.origin + routerPath('/v1/chat/completions'), JSON.stringify({ model: 'llama' }), bearer(OTHER));
    assert.equal(errorOf(nobody)['message'], 'A valid bearer token is required.');
  });

  test('an unknown model: 404 model_not_found whose message points to the model list', async () => {
    const a = await post(tg.origin + routerPath('/v1/chat/completions'), JSON.stringify({ model: 'gpt-9' }), bearer(FULL));
    assert.equal(a.status, 404, a.text);
    assert.equal(errorOf(a)['message'], "The model 'gpt-9' does not exist or is not served by this router: GET /api/v1/services/models/request/v1/models lists the models it serves.");
  });

  test('the OpenAI SDK with a scoped key: its models answer, another is 404 model_not_found as one that does not exist, and the list has only its own', async () => {
    const client = new OpenAI({ baseURL: tg.origin + routerPath('/v1'), apiKey: SCOPED, maxRetries: 0, timeout: 20_000 });
    const ok = await client.chat.completions.create({ model: 'llama', messages: [{ role: 'user', content: 'hello' }] });
    assert.equal(ok.model, 'llama');
    const refusals: { status: number; code: unknown; message: string }[] = [];
    for (const name of ['coder', 'no-such-model']) {
      const err = await client.chat.completions.create({ model: name, messages: [{ role: 'user', content: 'hello' }] }).then(
        () => assert.fail(`${name} was answered`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      refusals.push({ status: err.status, code: err.code, message: (err.error as { message: string }).message.replace(name, '<model>') });
    }
    assert.deepEqual(refusals[0], refusals[1], 'a model outside the key is refused as one that does not exist');
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.deepEqual(ids, ['llama', 'embedder']);
    const full = new OpenAI({ baseURL: tg.origin + routerPath('/v1'), apiKey: FULL, maxRetries: 0, timeout: 20_000 });
    const all = [];
    for await (const m of full.models.list()) all.push(m.id);
    assert.deepEqual(all, ['llama', 'coder', 'embedder']);
    // models.retrieve: its own model, and the other refused as one that does not exist.
    assert.equal((await client.models.retrieve('llama')).id, 'llama');
    assert.equal((await full.models.retrieve('coder')).id, 'coder');
    const retrieved = [];
    for (const name of ['coder', 'no-such-model']) {
      const err = await client.models.retrieve(name).then(
        () => assert.fail(`${name} was retrieved`),
        (e: unknown) => e,
      );
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      retrieved.push({ status: err.status, code: err.code, message: (err.error as { message: string }).message.replace(name, '<model>') });
    }
    assert.deepEqual(retrieved[0], retrieved[1], 'retrieve refuses a model outside the key as one that does not exist');
  });

  test('a scoped key against hostile bodies: split packets, a repeated "model", escaped spellings', async () => {
    const headers = { ...bearer(SCOPED), 'content-type': 'application/json' };
    const path = routerPath('/v1/chat/completions');
    const refused = [
      ['{"model":"co', 'der","messages":[]}'],
      ['{"model":"coder","messages":[],', '"model":"coder"}'],
      ['{"mod\\u0065l":"coder","messages":[]}'],
      ['{"model":"c\\u006fder","messages":[]}'],
      ['{"model":"c', '\\u006f', 'der"}'],
    ];
    for (const parts of refused) {
      const a = await splitPost(tg.port, path, headers, parts);
      assert.equal(a.status, 404, `${parts.join('')}: ${a.body}`);
      assert.equal(a.headers.get('x-sluice-error'), 'model_not_found', parts.join(''));
    }
    // Given twice with different values, the model is not known for sure: refused, whichever is in scope.
    for (const parts of [['{"model":"llama","messages":[],', '"model":"coder"}'], ['{"model":"coder","mod\\u0065l":"llama"}']]) {
      const a = await splitPost(tg.port, path, headers, parts);
      assert.equal(a.status, 400, `${parts.join('')}: ${a.body}`);
      assert.equal(a.headers.get('x-sluice-error'), 'bad_request', parts.join(''));
    }
    const allowed = await splitPost(tg.port, path, headers, ['{"mod\\u0065l":"lla', 'ma","messages":[{"role":"user","content":"x"}]}']);
    assert.equal(allowed.status, 200, allowed.body);
    assert.equal((JSON.parse(allowed.body) as Record<string, unknown>)['model'], 'llama');
  });
});
