// The upstream client against a replica that misbehaves on raw sockets (docs/architecture.md#fact-13):
// every refused answer is a 502 with Sluice's JSON error and nothing of the replica's bytes; 1xx
// answers are skipped; bytes after a complete answer never reach another request; HEAD, 204 and
// 304 carry no body; an answer cut short reaches the caller as an unclean end. After each of these
// the gateway goes on serving.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, type Dispatcher, request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { answer, type ScriptedReplica, startScriptedReplica } from '../fixtures/scripted-replica.js';
import { eventually } from '../helpers/wait.js';

/** Answers by path; `/refuse/NAME` sends REFUSED[NAME] and leaves the connection open. */
const REFUSED: Record<string, string> = {
  'content-length-and-transfer-encoding': 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nSECRET\r\n0\r\n\r\n',
  'differing-content-lengths': 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 7\r\n\r\nSECRET!',
  'repeated-content-length': 'HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Length: 6\r\n\r\nSECRET',
  'invalid-content-length': 'HTTP/1.1 200 OK\r\nContent-Length: 6x\r\n\r\nSECRET',
  'transfer-coding-gzip': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n6\r\nSECRET\r\n0\r\n\r\n',
  'transfer-coding-identity': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\nSECRET',
  'transfer-encoding-in-http-1.0': 'HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nSECRET\r\n0\r\n\r\n',
  'status-not-digits': 'HTTP/1.1 2OO OK\r\nContent-Length: 6\r\n\r\nSECRET',
  'status-version-2': 'HTTP/2.0 200 OK\r\nContent-Length: 6\r\n\r\nSECRET',
  'status-not-http': 'ICY 200 OK\r\nContent-Length: 6\r\n\r\nSECRET',
  'status-switching-protocols': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nSECRET',
  'obs-fold': 'HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 6\r\n\r\nSECRET',
  'bare-cr-in-value': 'HTTP/1.1 200 OK\r\nX-Odd: a\rb\r\nContent-Length: 6\r\n\r\nSECRET',
  'bare-lf-line-end': 'HTTP/1.1 200 OK\nContent-Length: 6\n\nSECRET',
  'space-before-colon': 'HTTP/1.1 200 OK\r\nContent-Length : 6\r\n\r\nSECRET',
  // MAX_HEAD_BYTES is 64 KiB: one field of 70 000 bytes is over it.
  'head-over-limit': `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(70_000)}\r\nContent-Length: 6\r\n\r\nSECRET`,
};

let replica: ScriptedReplica;
let tg: TestGateway;

before(async () => {
  replica = await startScriptedReplica((socket, req) => {
    const path = req.target;
    if (path.startsWith('/refuse/')) {
      socket.write(REFUSED[path.slice('/refuse/'.length)]!);
      return;
    }
    switch (path) {
      case '/ok':
        socket.write(answer('fine'));
        return;
      case '/interim':
        socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x.css>; rel=preload\r\n\r\n');
        setTimeout(() => socket.write(answer('after hints')), 20);
        return;
      case '/leftover':
        // A complete answer, then a second one nobody asked for (response smuggling).
        socket.write(answer('first') + answer('SMUGGLED'));
        return;
      case '/head':
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1234\r\n\r\n');
        return;
      case '/no-content':
        socket.write('HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n');
        return;
      case '/not-modified':
        socket.write('HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n');
        return;
      case '/short-length':
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..');
        setTimeout(() => socket.destroy(), 20);
        return;
      case '/short-chunked':
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
        setTimeout(() => socket.end(), 20);
        return;
      case '/bad-chunk':
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
        setTimeout(() => socket.write('zz\r\nworld\r\n0\r\n\r\n'), 20);
        return;
      case '/until-close':
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nread until ');
        setTimeout(() => socket.end('the close'), 20);
        return;
      case '/silent':
        return;
      case '/half-status':
        socket.write('HTTP/1.1 20');
        return;
      case '/stall-body':
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst bytes ');
        return;
      default:
        socket.write('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
    }
  });
  tg = await startTestGateway(
    rawService({ urls: [replica.url] }, { methods: ['GET', 'HEAD', 'POST'], timeouts: { responseHeadersMs: 400, bodyIdleMs: 400 } }),
  );
});

after(async () => {
  await tg.close();
  await replica.close();
});

async function get(path: string, method: 'GET' | 'HEAD' = 'GET', dispatcher?: Dispatcher): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  const res = await request(tg.url(path), { method, headers: AUTH, ...(dispatcher === undefined ? {} : { dispatcher }) });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

async function assertServing(dispatcher?: Dispatcher): Promise<void> {
  const ok = await get('/ok', 'GET', dispatcher);
  assert.equal(ok.status, 200);
  assert.equal(ok.body, 'fine');
}

for (const name of Object.keys(REFUSED)) {
  test(`refused answer (${name}): 502 upstream_unavailable, nothing relayed, the gateway keeps serving`, async () => {
    const before = replica.connections.length;
    const res = await get(`/refuse/${name}`);
    assert.equal(res.status, 502);
    assert.equal(res.headers['x-sluice-error'], 'upstream_unavailable');
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal((JSON.parse(res.body) as { error: { code: string } }).error.code, 'upstream_unavailable');
    assert.ok(!res.body.includes('SECRET'), 'none of the replica bytes reach the caller');
    // The replica left the connection open: the gateway closes it (it is never reused).
    const bad = replica.requests.at(-1)!.connection;
    await eventually(() => replica.connections[bad - 1]!.closedByGateway, 5_000, 'the gateway to close the refused connection');
    await assertServing();
    assert.ok(replica.connections.length > before, 'a fresh connection served the next request');
    assert.equal(tg.logs.filter((l) => l['msg'] === 'request' && l['outcome'] === 'upstream_unavailable').length > 0, true);
  });
}

test('1xx answers (100, 103) are skipped; the final answer is relayed', async () => {
  const res = await get('/interim');
  assert.equal(res.status, 200);
  assert.equal(res.body, 'after hints');
  assert.equal(res.headers['link'], undefined);
});

test('bytes after a complete answer never reach the next request: that connection is not reused', async () => {
  const first = await get('/leftover');
  assert.equal(first.status, 200);
  assert.equal(first.body, 'first');
  const conn = replica.requests.at(-1)!.connection;
  // At once, before an idle timeout could close it: the next request must not go on that connection.
  for (let i = 0; i < 3; i++) {
    const next = await get('/ok');
    assert.equal(next.body, 'fine');
    assert.notEqual(replica.requests.at(-1)!.connection, conn);
  }
  await eventually(() => replica.connections[conn - 1]!.closedByGateway, 5_000, 'the gateway to close the connection');
});

test('HEAD, 204 and 304 answers carry no body, and the connection stays in sync for the next request', async () => {
  // One caller connection, so one worker (each worker has its own upstream connections).
  const caller = new Client(tg.origin);
  after(() => caller.close());
  const head = await get('/head', 'HEAD', caller);
  assert.equal(head.status, 200);
  assert.equal(head.headers['content-length'], '1234');
  assert.equal(head.body, '');
  const conn = replica.requests.at(-1)!.connection;
  const noContent = await get('/no-content', 'GET', caller);
  assert.equal(noContent.status, 204);
  assert.equal(noContent.body, '');
  const notModified = await get('/not-modified', 'GET', caller);
  assert.equal(notModified.status, 304);
  assert.equal(notModified.body, '');
  await assertServing(caller);
  // The connections they went over were kept alive, in sync: none was closed by the gateway. (One
  // connection serves them all when an I/O poll separates the requests; with the gateway on its
  // own thread a request can arrive before the previous connection is reusable and take another.)
  const used = new Set(replica.requests.slice(-4).map((r) => r.connection));
  assert.ok(used.has(conn));
  for (const c of used) assert.equal(replica.connections[c - 1]!.closedByGateway, false, `connection ${c} was kept alive`);
});

test('an answer cut short reaches the caller as an unclean end (Content-Length and chunked)', async () => {
  for (const path of ['/short-length', '/short-chunked', '/bad-chunk']) {
    const res = await request(tg.url(path), { headers: AUTH });
    assert.equal(res.statusCode, 200, path);
    await assert.rejects(res.body.text(), `${path}: the caller must see the answer is incomplete`);
  }
  await assertServing();
});

test('an answer without framing is read until the replica closes, and ends cleanly', async () => {
  const res = await get('/until-close');
  assert.equal(res.status, 200);
  assert.equal(res.body, 'read until the close');
  await assertServing();
});

test('no status line within responseHeadersMs: 504 upstream_timeout (also with half a status line)', async () => {
  for (const path of ['/silent', '/half-status']) {
    const res = await get(path);
    assert.equal(res.status, 504, path);
    assert.equal(res.headers['x-sluice-error'], 'upstream_timeout');
    const conn = replica.requests.at(-1)!.connection;
    await eventually(() => replica.connections[conn - 1]!.closedByGateway, 5_000, 'the gateway to close the connection');
  }
  await assertServing();
});

test('no body bytes within bodyIdleMs: the answer is truncated', async () => {
  const res = await request(tg.url('/stall-body'), { headers: AUTH });
  assert.equal(res.statusCode, 200);
  await assert.rejects(res.body.text());
  await assertServing();
});
