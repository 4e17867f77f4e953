// Keep-alive rules of the upstream client (docs/architecture.md#fact-13), against raw-socket replicas:
// a replica that closes each connection after answering costs no failed request and no request
// sent twice (also with concurrency-limited queueing); a FIN on an idle connection is noticed;
// `Keep-Alive: timeout` is honoured (Sluice closes first); `Connection: close` and HTTP/1.0
// answers end the connection.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { answer, type ScriptedReplica, startScriptedReplica } from '../fixtures/scripted-replica.js';
import { eventually } from '../helpers/wait.js';

let closing: ScriptedReplica;
let polite: ScriptedReplica;
let hinted: ScriptedReplica;
let tg: TestGateway;

before(async () => {
  // Answers, then ends the connection at once, without saying so in the answer.
  closing = await startScriptedReplica((socket, req) => {
    socket.write(answer(req.headers['x-request-id']!));
    socket.end();
  });
  // The same, but announces it with `Connection: close`.
  polite = await startScriptedReplica((socket, req) => {
    socket.write(answer(req.headers['x-request-id']!, 'connection: close\r\n'));
    socket.end();
  });
  // Keep-alive with hints and a replica-side idle timeout, and a few odd endings.
  const idleTimers = new Map<number, NodeJS.Timeout>();
  hinted = await startScriptedReplica((socket, req, conn) => {
    clearTimeout(idleTimers.get(conn.id));
    switch (req.target) {
      case '/timeout-1':
        socket.write(answer('hinted', 'keep-alive: timeout=1\r\n'));
        // Like a real server: close the connection after 1 s idle.
        idleTimers.set(
          conn.id,
          setTimeout(() => socket.end(), 1_000),
        );
        return;
      case '/fin-later':
        socket.write(answer('then FIN'));
        setTimeout(() => socket.end(), 50);
        return;
      case '/http10':
        socket.write('HTTP/1.0 200 OK\r\ncontent-length: 6\r\n\r\nold ok');
        return;
      case '/http10-keep-alive':
        socket.write('HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 6\r\n\r\nold ok');
        return;
      default:
        socket.write(answer('fine'));
    }
  });
  // workers: 1: these cases follow one upstream connection from request to request, which needs
  // every request to reach the same data plane (each worker has its own upstream connections) and
  // an I/O poll between an answer and the next request (a connection is reusable only after one).
  tg = await startTestGateway(
    [
      rawService({ urls: [closing.url] }, { slug: 'closing' }),
      rawService({ urls: [closing.url], concurrency: 2 }, { slug: 'closing-limited' }),
      rawService({ urls: [polite.url] }, { slug: 'polite' }),
      rawService({ urls: [hinted.url] }, { slug: 'hinted' }),
    ],
    { workers: 1 },
  );
});

after(async () => {
  await tg.close();
  await Promise.all([closing.close(), polite.close(), hinted.close()]);
});

async function get(path: string, slug: string): Promise<{ status: number; body: string; id: string }> {
  const res = await request(tg.url(path, slug), { method: 'POST', headers: AUTH, body: '{}' });
  return { status: res.statusCode, body: await res.body.text(), id: String(res.headers['x-request-id']) };
}

/** The first failed requests' log lines, for assertion messages. */
function failures(): string {
  return JSON.stringify(tg.logs.filter((l) => l['msg'] === 'request' && l['outcome'] !== 'ok').slice(0, 2));
}

function assertEachOnce(replica: ScriptedReplica, ids: string[], from: number): void {
  const seen = replica.requests.slice(from).map((r) => r.headers['x-request-id']);
  assert.equal(seen.length, ids.length, 'the replica saw each request exactly once');
  assert.deepEqual([...seen].sort(), [...ids].sort());
}

for (const [name, slug, which] of [
  ['closes each connection after answering', 'closing', () => closing],
  ['closes each connection after answering, with concurrency-limited queueing', 'closing-limited', () => closing],
  ['answers with Connection: close', 'polite', () => polite],
] as const) {
  test(`a replica that ${name}: no request fails, none is sent twice (sequential and concurrent)`, async () => {
    const replica = which();
    const from = replica.requests.length;
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const res = await get('/x', slug);
      assert.equal(res.status, 200, `sequential request ${i}: ${res.body} ${failures()}`);
      assert.equal(res.body, res.id);
      ids.push(res.id);
    }
    const concurrent = await Promise.all(Array.from({ length: 40 }, () => get('/x', slug)));
    for (const res of concurrent) {
      assert.equal(res.status, 200, `${res.body} ${failures()}`);
      assert.equal(res.body, res.id);
      ids.push(res.id);
    }
    assertEachOnce(replica, ids, from);
    // One connection per request: none was reused after the replica closed it.
    const connections = new Set(replica.requests.slice(from).map((r) => r.connection));
    assert.equal(connections.size, ids.length);
  });
}

test('Keep-Alive: timeout=1 — the connection is reused, then Sluice closes it before the replica does', async () => {
  const from = hinted.requests.length;
  const a = await get('/timeout-1', 'hinted');
  const b = await get('/timeout-1', 'hinted');
  assert.equal(a.body, 'hinted');
  assert.equal(b.body, 'hinted');
  const [ra, rb] = hinted.requests.slice(from);
  assert.equal(ra!.connection, rb!.connection, 'kept alive between the two requests');
  const conn = hinted.connections[ra!.connection - 1]!;
  await eventually(() => conn.closed, 5_000, 'the idle connection to close');
  assert.equal(conn.closedByGateway, true, 'Sluice closed the idle connection before the replica timeout');
  assert.equal(conn.closedByReplica, false);
  const c = await get('/timeout-1', 'hinted');
  assert.equal(c.status, 200);
  assert.notEqual(hinted.requests.at(-1)!.connection, conn.id);
});

test('a FIN on an idle connection is noticed: the next request goes on a new connection and succeeds', async () => {
  const first = await get('/fin-later', 'hinted');
  assert.equal(first.body, 'then FIN');
  const conn = hinted.connections[hinted.requests.at(-1)!.connection - 1]!;
  await eventually(() => conn.closed, 5_000, 'the replica to close the idle connection');
  assert.equal(conn.closedByReplica, true);
  const warnings = tg.logs.filter((l) => l['level'] === 40 || l['level'] === 'warn').length;
  const next = await get('/x', 'hinted');
  assert.equal(next.status, 200);
  assert.equal(next.body, 'fine');
  assert.notEqual(hinted.requests.at(-1)!.connection, conn.id);
  assert.equal(tg.logs.filter((l) => l['level'] === 40 || l['level'] === 'warn').length, warnings, 'no error logged');
});

test('an HTTP/1.0 answer ends the connection unless it says keep-alive', async () => {
  const old = await get('/http10', 'hinted');
  assert.equal(old.body, 'old ok');
  const conn = hinted.connections[hinted.requests.at(-1)!.connection - 1]!;
  await eventually(() => conn.closedByGateway, 5_000, 'the gateway to close the HTTP/1.0 connection');

  await get('/http10-keep-alive', 'hinted');
  const kept = hinted.requests.at(-1)!.connection;
  const again = await get('/x', 'hinted');
  assert.equal(again.body, 'fine');
  assert.equal(hinted.requests.at(-1)!.connection, kept, 'HTTP/1.0 with keep-alive is reused');
});
