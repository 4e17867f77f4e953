// Errors Sluice produces itself (docs/api.md#errors): status, JSON body, X-Sluice-Error, the extra
// headers (WWW-Authenticate, Allow), and that nothing reaches the replica when it should not.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, TEST_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { sha256Hex } from '../../src/cli/token.js';
import { closedPort, readBody, startReplica, type TestReplica } from '../helpers/replica.js';

const OTHER_TOKEN = 'slc_a_token_of_another_service';

let replica: TestReplica;
let silent: TestReplica;
let tg: TestGateway;
let downPort: number;

before(async () => {
  replica = await startReplica(async (req, res) => {
    const body = await readBody(req);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`got ${body.length}`);
  });
  // Accepts the request, never answers.
  silent = await startReplica(() => undefined);
  downPort = await closedPort();
  tg = await startTestGateway([
    rawService({ urls: [replica.url] }, { slug: 'ok', maxRequestBytes: 1000, methods: ['POST', 'PUT'] }),
    rawService({ urls: [`http://127.0.0.1:${downPort}`] }, { slug: 'down' }),
    rawService({ urls: [silent.url] }, { slug: 'silent', timeouts: { responseHeadersMs: 300, bodyIdleMs: 1000 } }),
    rawService({ urls: [replica.url] }, { slug: 'other', tokens: [{ name: 'other', sha256: sha256Hex(OTHER_TOKEN) }] }),
  ]);
});

after(async () => {
  await tg.close();
  await replica.close();
  await silent.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: { error: { code: string; message: string } };
}

async function call(url: string, init: Parameters<typeof request>[1] = {}): Promise<Answer> {
  const res = await request(url, { method: 'POST', body: 'hello', ...init });
  const text = await res.body.text();
  let body: Answer['body'];
  try {
    body = JSON.parse(text) as Answer['body'];
  } catch {
    throw new Error(`not a JSON error body (${res.statusCode}): ${text.slice(0, 200)}`);
  }
  return { status: res.statusCode, headers: res.headers, body };
}

function assertError(answer: Answer, status: number, code: string): void {
  assert.equal(answer.status, status, `status for ${code}`);
  assert.equal(answer.body.error.code, code);
  assert.equal(typeof answer.body.error.message, 'string');
  assert.ok(answer.body.error.message.length > 0);
  assert.equal(answer.headers['x-sluice-error'], code);
  assert.match(String(answer.headers['content-type']), /^application\/json/);
  assert.ok(answer.headers['x-request-id'], 'errors carry a request id too');
}

test('401 without a token, with the Bearer challenge; nothing reaches the replica', async () => {
  const seen = replica.seen.length;
  const answer = await call(tg.url('/v1/x', 'ok'));
  assertError(answer, 401, 'unauthorized');
  assert.equal(answer.headers['www-authenticate'], 'Bearer realm="sluice"');
  assert.equal(replica.seen.length, seen);
});

test('401 with a wrong token adds error="invalid_token"', async () => {
  const answer = await call(tg.url('/v1/x', 'ok'), { headers: { authorization: `Bearer ${TEST_TOKEN}-wrong` } });
  assertError(answer, 401, 'unauthorized');
  assert.equal(answer.headers['www-authenticate'], 'Bearer realm="sluice", error="invalid_token"');
});

test('400 for a malformed Authorization header', async () => {
  for (const value of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', TEST_TOKEN]) {
    assertError(await call(tg.url('/v1/x', 'ok'), { headers: { authorization: value } }), 400, 'bad_request');
  }
});

test('a token of one service does not open another', async () => {
  const seen = replica.seen.length;
  assertError(await call(tg.url('/v1/x', 'other'), { headers: AUTH }), 401, 'unauthorized');
  assertError(await call(tg.url('/v1/x', 'ok'), { headers: { authorization: `Bearer ${OTHER_TOKEN}` } }), 401, 'unauthorized');
  const own = await request(tg.url('/v1/x', 'other'), { method: 'POST', headers: { authorization: `Bearer ${OTHER_TOKEN}` }, body: 'hi' });
  assert.equal(own.statusCode, 200);
  assert.equal(await own.body.text(), 'got 2');
  assert.equal(replica.seen.length, seen + 1, 'only the request with its own token reached the replica');
});

test('404 not_found for routes outside the relay, 404 service_not_found for an unknown slug', async () => {
  assertError(await call(`${tg.origin}/nope`, { headers: AUTH }), 404, 'not_found');
  assertError(await call(tg.url('', 'ok'), { headers: AUTH }), 404, 'not_found');
  assertError(await call(`${tg.origin}/api/v1/services/ok/requestX/v1`, { headers: AUTH }), 404, 'not_found');
  assertError(await call(`${tg.origin}/api/v1/services/ok`, { headers: AUTH }), 404, 'not_found');
  assertError(await call(tg.url('/v1/x', 'nosuch'), { headers: AUTH }), 404, 'service_not_found');
});

test('405 with Allow for a method the service does not enable', async () => {
  const answer = await call(tg.url('/v1/x', 'ok'), { method: 'DELETE', headers: AUTH, body: undefined });
  assertError(answer, 405, 'method_not_allowed');
  assert.equal(answer.headers.allow, 'POST, PUT');
  const get = await call(tg.url('/v1/x', 'down'), { method: 'GET', headers: AUTH, body: undefined });
  assertError(get, 405, 'method_not_allowed');
  assert.equal(get.headers.allow, 'POST');
});

test('413 at once from Content-Length; nothing reaches the replica', async () => {
  const seen = replica.seen.length;
  const answer = await call(tg.url('/v1/x', 'ok'), { headers: AUTH, body: Buffer.alloc(1001) });
  assertError(answer, 413, 'payload_too_large');
  assert.equal(replica.seen.length, seen);
  const exact = await request(tg.url('/v1/x', 'ok'), { method: 'POST', headers: AUTH, body: Buffer.alloc(1000) });
  assert.equal(await exact.body.text(), 'got 1000');
});

test('413 when a chunked body crosses the limit', async () => {
  async function* chunks() {
    for (let i = 0; i < 20; i++) {
      yield Buffer.alloc(100, 0x61);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  let answer: Answer;
  try {
    answer = await call(tg.url('/v1/x', 'ok'), { headers: AUTH, body: Readable.from(chunks()) });
  } catch (err) {
    // The gateway closes the connection after its answer; a client still sending may see a reset.
    assert.fail(`expected a 413 answer, got ${String(err)}`);
  }
  assertError(answer, 413, 'payload_too_large');
});

test('invalid_path for every unsafe path rule; nothing reaches the replica', async () => {
  const seen = replica.seen.length;
  const unsafe = [
    '/a/../b',
    '/a/./b',
    '/..',
    '/a/%2e%2e/b',
    '/a/%2E%2E/b',
    '/a/.%2e/b',
    '/a/%2e/b',
    '/a/%2fb',
    '/a/%2Fb',
    '/a/%5cb',
    '/a/%5Cb',
    '/a\\b',
    '//evil.example/x',
    '/a/%00',
    '/a/%1f',
    '/a/%7f',
    '/a/%0d%0aInjected:1',
    '/a/%zz',
  ];
  for (const path of unsafe) {
    const answer = await rawRequest(tg.port, `POST /api/v1/services/ok/request${path} HTTP/1.1`);
    assert.equal(answer.status, 400, `status for ${path}`);
    assert.match(answer.text, /"code":"invalid_path"/, `code for ${path}`);
  }
  const fragment = await rawRequest(tg.port, 'POST /api/v1/services/ok/request/a#frag HTTP/1.1');
  assert.equal(fragment.status, 400);
  assert.equal(replica.seen.length, seen, 'no unsafe path reached the replica');
});

test('502 upstream_unavailable when the replica refuses connections', async () => {
  assertError(await call(tg.url('/v1/x', 'down'), { headers: AUTH }), 502, 'upstream_unavailable');
});

test('504 upstream_timeout when the replica sends no status line within responseHeadersMs', async () => {
  const started = Date.now();
  const answer = await call(tg.url('/v1/x', 'silent'), { headers: AUTH });
  assertError(answer, 504, 'upstream_timeout');
  assert.ok(Date.now() - started >= 250, 'the deadline comes from the config (300 ms)');
});

test('an unauthenticated request does not have its large body read', async () => {
  // 5 MiB announced; the gateway answers 401 and closes instead of reading it.
  const { connect } = await import('node:net');
  const socket = connect(tg.port, '127.0.0.1');
  socket.write(`POST ${new URL(tg.url('/v1/x', 'ok')).pathname} HTTP/1.1\r\nHost: x\r\nContent-Length: ${5 * 1024 * 1024}\r\n\r\n`);
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString()));
  await new Promise<void>((resolve) => socket.on('close', () => resolve()));
  assert.match(text, /^HTTP\/1\.1 401 /);
});

/** Sends one request with a raw request line (paths undici would normalize or refuse). */
async function rawRequest(port: number, requestLine: string): Promise<{ status: number; text: string }> {
  const { connect } = await import('node:net');
  const socket = connect(port, '127.0.0.1');
  socket.write(`${requestLine}\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
  let text = '';
  for await (const chunk of socket) text += (chunk as Buffer).toString();
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  return { status, text };
}
