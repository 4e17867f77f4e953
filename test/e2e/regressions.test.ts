// Regression tests, one per bug found in review, each named after the bug.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closedPort, startReplica, type TestReplica } from '../helpers/replica.js';
import { UWS_IDLE_MS } from '../helpers/uws-timing.js';
import { eventually } from '../helpers/wait.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function setUp(handler: Parameters<typeof startReplica>[0], extra: Record<string, unknown> = {}, replicas: Record<string, unknown> = {}): Promise<{ replica: TestReplica; tg: TestGateway }> {
  const replica = await startReplica(handler);
  const tg = await startTestGateway(rawService({ urls: [replica.url], ...replicas }, extra));
  cleanups.push(() => replica.close(), () => tg.close());
  return { replica, tg };
}

/** A raw connection that collects everything it reads. */
async function rawClient(port: number): Promise<{ socket: Socket; text: () => string; waitFor: (pattern: RegExp) => Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => undefined);
  cleanups.push(async () => void socket.destroy());
  return {
    socket,
    text: () => text,
    waitFor: (pattern) => eventually(() => pattern.test(text), 10_000, `the caller to read ${pattern}`),
  };
}

test('regression: an answer that ends while the caller is still uploading never leaves the connection hanging', async () => {
  // The replica answers at once without reading the body; the caller's socket is paused by then
  // (fact 9: a socket paused for the body and never resumed held the connection until uWS's idle
  // timeout, unannounced). Now the connection ends up one of two ways, each checked: the rest of
  // the body arrived in time (or at most 128 KiB of it was left) and the next request on the
  // connection is served; or the answer says `Connection: close` and the gateway closes the
  // connection. Which one depends on how much of the body the gateway had read when the answer
  // ended (refusal-mid-upload.test.ts pins each down).
  const { tg } = await setUp((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5' });
    res.end('early');
  });
  const caller = await rawClient(tg.port);
  let closed = false;
  caller.socket.on('close', () => (closed = true));
  const size = 8 * 1024 * 1024;
  caller.socket.write(`POST ${new URL(tg.url('/x')).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Length: ${size}\r\n\r\n`);
  const chunk = Buffer.alloc(256 * 1024, 0x61);
  const sending = (async () => {
    try {
      for (let sent = 0; sent < size && !closed; sent += chunk.length) {
        if (!caller.socket.write(chunk)) await Promise.race([once(caller.socket, 'drain'), once(caller.socket, 'close')]);
      }
    } catch {
      // The gateway reset the connection while the body was still being sent (the close branch).
    }
  })();
  await caller.waitFor(/\r\n\r\nearly/);
  if (/\r\nconnection: close\r\n/i.test(caller.text())) {
    // uWS's idle timeout closes it: about 10 s, 30 s with v20.57.0.
    await eventually(() => closed, UWS_IDLE_MS + 15_000, 'the gateway to close the connection it said it would');
    assert.doesNotMatch(caller.text(), /earlyHTTP/, 'nothing after the answer');
  } else {
    await sending;
    caller.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await caller.waitFor(/earlyHTTP\/1\.1 200 OK/);
  }
  // A worker's log lines reach the log a moment after its answers (batched through the main thread).
  await eventually(() => tg.logs.some((l) => l.msg === 'request'), 5_000, 'the access log line');
  const line = tg.logs.find((l) => l.msg === 'request');
  assert.equal(line?.outcome, 'ok');
  assert.equal(line?.status, 200);
});

test('regression: an error answer to a queued request with a complete body keeps the connection usable', async () => {
  let releaseFirst!: () => void;
  const held = new Promise<void>((resolve) => (releaseFirst = resolve));
  let arrived = 0;
  const { tg } = await setUp(
    async (req, res) => {
      arrived++;
      req.resume();
      await held;
      res.end('ok');
    },
    { queue: { maxRequests: 10, maxWaitMs: 300 } },
    { concurrency: 1 },
  );
  const first = request(tg.url('/x'), { method: 'POST', headers: AUTH, body: 'a' });
  await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.to === 'ready'));
  // The first request holds the one slot before the second is sent (they may reach different workers).
  await eventually(() => arrived === 1, 5_000, 'the first request to reach the replica');
  const caller = await rawClient(tg.port);
  const size = 100_000; // over the 64 KiB a queued request keeps, so the socket is paused
  caller.socket.write(`POST ${new URL(tg.url('/x')).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Length: ${size}\r\n\r\n`);
  caller.socket.write(Buffer.alloc(size, 0x62));
  await caller.waitFor(/^HTTP\/1\.1 503 [^]*"no_replica"/);
  caller.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await caller.waitFor(/HTTP\/1\.1 200 OK/);
  releaseFirst();
  await (await first).body.dump();
});

test('regression: a replica that refuses the retry leaves the rotation too', async () => {
  const tg = await startTestGateway(rawService({ urls: [`http://127.0.0.1:${await closedPort()}`, `http://127.0.0.1:${await closedPort()}`] }));
  cleanups.push(() => tg.close());
  const res = await request(tg.url('/x'), { method: 'POST', headers: AUTH, body: 'x' });
  assert.equal(res.statusCode, 502);
  await res.body.dump();
  // The control plane moves them when the worker's message reaches it, maybe just after the 502.
  const out = (): unknown[] => tg.logs.filter((l) => l.msg === 'replica state' && l.to === 'unreachable').map((l) => l.replica);
  await eventually(() => out().length >= 2, 5_000, 'two replicas out of rotation');
  assert.deepEqual(out().sort(), ['svc-1', 'svc-2'], 'both refusing replicas left the rotation');
});

test('regression: answers to HEAD requests carry no body, so the connection stays in sync', async () => {
  const { tg } = await setUp(
    (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      res.end('hi');
    },
    { methods: ['POST', 'HEAD'] },
  );
  const caller = await rawClient(tg.port);
  const path = new URL(tg.url('/x')).pathname;
  // A relayed HEAD, a refused one (no token) and an ops HEAD, one after another on one connection
  // (uWS closes a connection that pipelines a request behind one still being answered).
  const requests = [
    `HEAD ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\n\r\n`,
    `HEAD ${path} HTTP/1.1\r\nHost: x\r\n\r\n`,
    'HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
  ];
  for (const [i, head] of requests.entries()) {
    caller.socket.write(head);
    await eventually(() => caller.text().split(/(?=HTTP\/1\.1 )/).length === i + 1 && caller.text().endsWith('\r\n\r\n'), 10_000, `answer ${i + 1}`);
  }
  // A witness on the same connection: stray body bytes, were there any, would arrive before its answer.
  caller.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await eventually(() => caller.text().split(/(?=HTTP\/1\.1 )/).length === 4 && caller.text().endsWith('}'), 10_000, 'the witness answer');
  const answers = caller.text().split(/(?=HTTP\/1\.1 )/).slice(0, 3);
  assert.equal(answers.length, 3);
  assert.match(answers[0]!, /^HTTP\/1\.1 200 OK\r\n[^]*content-length: 2\r\n/i, "the replica's status and Content-Length");
  assert.match(answers[1]!, /^HTTP\/1\.1 401 /);
  assert.match(answers[2]!, /^HTTP\/1\.1 200 OK\r\n/);
  for (const answer of answers) assert.ok(answer.endsWith('\r\n\r\n'), `no body after: ${JSON.stringify(answer)}`);
});

test('regression: a replica that fails after its status line but before any body byte gets a 502 error body', async () => {
  const { tg } = await setUp((req, res) => {
    req.resume();
    res.writeHead(200);
    res.flushHeaders();
    setTimeout(() => res.socket?.destroy(), 50);
  });
  const res = await request(tg.url('/x'), { method: 'POST', headers: AUTH, body: 'x' });
  assert.equal(res.statusCode, 502);
  assert.equal(res.headers['x-sluice-error'], 'upstream_unavailable');
  assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'upstream_unavailable');
});
