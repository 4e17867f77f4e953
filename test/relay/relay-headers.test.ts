// Header policy (docs/api.md#what-the-replica-receives, docs/api.md#what-the-caller-receives): the caller sees only the replica's Content-Type and
// Content-Length plus Sluice's X-Request-Id; the replica sees only the allowed caller headers.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, TEST_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

let replica: TestReplica;
let tg: TestGateway;
const BODY = JSON.stringify({ answer: 42 });

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    if (req.url === '/chunked') {
      res.writeHead(201, { 'content-type': 'text/plain; charset=utf-8', 'x-anything': 'nope' });
      res.write('part one, ');
      res.end('part two');
      return;
    }
    res.writeHead(200, {
      'set-cookie': 'session=secret; HttpOnly',
      server: 'replica/1.0',
      'x-anything': 'should not pass',
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(BODY)),
      'cache-control': 'no-store',
    });
    res.end(BODY);
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }, { forwardHeaders: ['x-tenant'] }));
});

after(async () => {
  await tg.close();
  await replica.close();
});

test('the caller sees only Content-Type, Content-Length and X-Request-Id of the replica answer', async () => {
  const res = await request(tg.url('/v1/x'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(res.statusCode, 200);
  const text = await res.body.text();
  assert.equal(text, BODY);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  assert.equal(res.headers['content-length'], String(Buffer.byteLength(BODY)));
  assert.match(String(res.headers['x-request-id']), /^[0-9a-f]{12}-[0-9a-z]+$/);
  for (const dropped of ['set-cookie', 'server', 'x-anything', 'cache-control']) {
    assert.equal(res.headers[dropped], undefined, `${dropped} must not reach the caller`);
  }
});

test('an answer without Content-Length is relayed chunked with the replica status', async () => {
  const res = await request(tg.url('/chunked'), { method: 'POST', headers: AUTH, body: '' });
  assert.equal(res.statusCode, 201);
  assert.equal(res.headers['transfer-encoding'], 'chunked');
  assert.equal(res.headers['content-length'], undefined);
  assert.equal(res.headers['x-anything'], undefined);
  assert.equal(await res.body.text(), 'part one, part two');
});

test('the replica sees only the allowed caller headers, plus X-Request-Id and Accept-Encoding: identity', async () => {
  const before = replica.seen.length;
  const res = await request(tg.url('/v1/y?z=1'), {
    method: 'POST',
    headers: {
      ...AUTH,
      cookie: 'a=b',
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'accept-encoding': 'gzip, br',
      'x-tenant': 'acme',
      'x-not-forwarded': 'secret',
      'user-agent': 'test-agent',
      'x-request-id': 'caller-chosen',
      'x-forwarded-for': '10.0.0.1',
    },
    body: '{"a":1}',
  });
  const requestId = res.headers['x-request-id'];
  await res.body.dump();
  const seen = replica.seen[before]!;
  assert.equal(seen.url, '/v1/y?z=1');
  assert.equal(seen.headers.authorization, undefined);
  assert.equal(seen.headers.cookie, undefined);
  assert.equal(seen.headers['x-not-forwarded'], undefined);
  assert.equal(seen.headers['user-agent'], undefined);
  assert.equal(seen.headers['x-forwarded-for'], undefined);
  assert.equal(seen.headers['accept-encoding'], 'identity');
  assert.equal(seen.headers['x-request-id'], requestId, 'the replica gets the id the caller was given');
  assert.notEqual(requestId, 'caller-chosen');
  assert.equal(seen.headers['content-type'], 'application/json');
  assert.equal(seen.headers.accept, 'text/event-stream');
  assert.equal(seen.headers['x-tenant'], 'acme');
  assert.equal(seen.headers['content-length'], '7');
  assert.equal(seen.headers.host, new URL(replica.url).host);
  const names = new Set(seen.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()));
  const allowed = new Set(['host', 'connection', 'content-length', 'content-type', 'accept', 'accept-encoding', 'x-request-id', 'x-tenant']);
  for (const name of names) assert.ok(allowed.has(name), `unexpected header at the replica: ${name}`);
});

test('a chunked caller body reaches the replica whole, with Content-Length (held: docs/configuration.md#chunked-uploads)', async () => {
  const before = replica.seen.length;
  async function* parts() {
    yield Buffer.from('one ');
    yield Buffer.from('two');
  }
  const res = await request(tg.url('/v1/chunked-upload'), { method: 'POST', headers: AUTH, body: Readable.from(parts()) });
  await res.body.dump();
  const seen = replica.seen[before]!;
  assert.equal(seen.headers['transfer-encoding'], undefined);
  assert.equal(seen.headers['content-length'], '7');
});

test('the token appears in no log line', async () => {
  const res = await request(tg.url('/v1/z'), { method: 'POST', headers: AUTH, body: 'x' });
  await res.body.dump();
  const bad = await request(tg.url('/v1/z'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}x` }, body: 'x' });
  await bad.body.dump();
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.tokenName === 'test'), 5000, 'the access log line naming the token');
  assert.ok(!tg.logText().includes(TEST_TOKEN.slice(4)), 'no log line contains the token');
});
