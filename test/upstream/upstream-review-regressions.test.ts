// Regression tests for the bugs an adversarial review of the upstream client (src/upstream/) and
// its handler (src/relay/) found, each named after its bug. Black-box where the bug is visible
// from outside: the real gateway on port 0, real sockets, a scripted or frozen replica.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { request } from 'undici';
import { answer, startScriptedReplica } from '../fixtures/scripted-replica.js';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startReplica } from '../helpers/replica.js';
import { eventually, sleep } from '../helpers/wait.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function gatewayFor(url: string, extra: Record<string, unknown> = {}, replicas: Record<string, unknown> = {}): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [url], ...replicas }, extra));
  cleanups.push(() => tg.close());
  return tg;
}

/** A replica process that froze: the kernel accepts connections, nothing reads or answers until `thaw`. */
async function startFrozenReplica(): Promise<{ url: string; sockets: Socket[]; closed: Set<Socket>; thaw(): void }> {
  const sockets: Socket[] = [];
  const closed = new Set<Socket>();
  const server: Server = createServer((socket) => {
    socket.pause();
    socket.on('error', () => undefined);
    socket.on('close', () => closed.add(socket));
    sockets.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    sockets,
    closed,
    thaw: () => {
      for (const s of sockets) s.resume();
    },
  };
}

/** A raw caller that collects what it reads and never fails on a reset. */
async function rawCaller(port: number): Promise<{ socket: Socket; text: () => string; closed: () => boolean }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  cleanups.push(async () => void socket.destroy());
  return { socket, text: () => text, closed: () => closed };
}

/** Writes `size` body bytes as fast as the socket takes them, until done or the socket closes. */
async function upload(socket: Socket, size: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  for (let sent = 0; sent < size && !socket.destroyed; sent += chunk.length) {
    if (!socket.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          socket.off('drain', done);
          socket.off('close', done);
          resolve();
        };
        socket.on('drain', done);
        socket.on('close', done);
      });
    }
  }
}

test('regression: a replica that stops reading a large upload gets 504 after responseHeadersMs, not a request that hangs forever', async () => {
  const frozen = await startFrozenReplica();
  const tg = await gatewayFor(frozen.url, { timeouts: { responseHeadersMs: 500, bodyIdleMs: 500 } });
  const caller = await rawCaller(tg.port);
  // Far more than the kernel buffers between the gateway and the replica can hold.
  const size = 96 * 1024 * 1024;
  caller.socket.write(`POST ${new URL(tg.url('/upload')).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Length: ${size}\r\n\r\n`);
  void upload(caller.socket, size);
  // Before the fix the head deadline never ran while the upload was blocked: uWS cut the caller
  // after its own idle timeout with no answer, logged as 499 client_closed.
  await eventually(() => /^HTTP\/1\.1 504 /.test(caller.text()) || caller.closed(), 60_000, 'an answer');
  assert.match(caller.text(), /x-sluice-error: upstream_timeout/i);
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.outcome === 'upstream_timeout'), 10_000, 'the access log line');
  // The gateway closed the replica's connection: once it thaws, the replica reads to the close.
  frozen.thaw();
  await eventually(() => frozen.sockets.length > 0 && frozen.closed.size === frozen.sockets.length, 10_000, 'the replica connection to close');
});

test('regression: a request whose caller leaves while it waits in the queue logs the time it waited (queuedMs)', async () => {
  // Concurrency 1: the first request holds the only slot, so the second one waits in the queue.
  const held: Socket[] = [];
  const replica = await startScriptedReplica((socket) => void held.push(socket));
  cleanups.push(() => replica.close());
  const tg = await gatewayFor(replica.url, { methods: ['GET', 'POST'] }, { concurrency: 1 });
  const path = new URL(tg.url('/held')).pathname;
  const first = await rawCaller(tg.port);
  first.socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\n\r\n`);
  await eventually(() => held.length === 1, 10_000, 'the first request to reach the replica');
  const second = await rawCaller(tg.port);
  second.socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\n\r\n`);
  await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}')) === 1, 10_000, 'the second request to be queued');
  await sleep(200);
  second.socket.destroy();
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.outcome === 'client_closed'), 10_000, 'the access log line');
  const line = tg.logs.find((l) => l.msg === 'request' && l.outcome === 'client_closed')!;
  // Before the fix: 0, as if it had never waited.
  assert.ok(typeof line.queuedMs === 'number' && line.queuedMs >= 150, `queuedMs ${String(line.queuedMs)}`);
  held[0]!.write(answer('done'));
  await eventually(() => first.text().endsWith('done'), 10_000, 'the first answer');
});

// Decision, not a bug: bodyIdleMs times the replica, not the caller. While the caller is slow the
// replica's stream is paused (backpressure) and the deadline waits; a caller that stops reading
// for good is cut by the front end's own idle timeout, which aborts the upstream exchange.
for (const framing of ['content-length', 'chunked']) {
  test(`a caller slower than bodyIdleMs gets the whole ${framing} answer: the paused stream is not timed out`, async () => {
    const size = 32 * 1024 * 1024;
    let paused = false;
    const replica = await startReplica(async (req, res) => {
      if (req.url?.endsWith('/stall') === true) {
        // The witness: a head and one byte, then silence until the gateway gives up on it.
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('x');
        return;
      }
      res.writeHead(200, framing === 'chunked' ? { 'content-type': 'application/octet-stream' } : { 'content-type': 'application/octet-stream', 'content-length': String(size) });
      const chunk = Buffer.alloc(256 * 1024, 0x62);
      for (let sent = 0; sent < size; sent += chunk.length) {
        if (res.write(chunk)) continue;
        paused = true;
        await once(res, 'drain');
      }
      res.end();
    });
    cleanups.push(() => replica.close());
    const tg = await gatewayFor(replica.url, { methods: ['GET', 'POST'], timeouts: { responseHeadersMs: 300, bodyIdleMs: 300 } });
    const caller = await rawCaller(tg.port);
    caller.socket.pause();
    caller.socket.write(`GET ${new URL(tg.url('/big')).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nConnection: close\r\n\r\n`);
    // Reads nothing: the kernel buffers fill and the gateway pauses the replica…
    await eventually(() => paused, 30_000, 'the replica to be paused');
    // …for longer than bodyIdleMs: a request whose replica went silent after it was timed out meanwhile.
    const stall = await request(tg.url('/stall'), { headers: AUTH });
    await assert.rejects(stall.body.text(), 'the silent replica was timed out');
    await eventually(() => tg.logs.some((l) => l.msg === 'request' && String(l.path).endsWith('/stall')), 10_000, 'the timed-out request logged');
    let received = 0;
    caller.socket.on('data', (d: Buffer) => (received += d.length));
    caller.socket.resume();
    await eventually(() => caller.closed(), 30_000, 'the answer to end');
    assert.ok(received > size, `received ${received} bytes`);
    // The data plane runs in worker threads (one per CPU by default), which post their log lines
    // to the main thread in batches: the access line can arrive after the caller saw the close.
    const bigLine = (): Record<string, unknown> | undefined => tg.logs.find((l) => l.msg === 'request' && String(l.path).endsWith('/big'));
    await eventually(() => bigLine() !== undefined, 10_000, 'the access line of the big answer');
    const line = bigLine();
    assert.equal(line?.outcome, 'ok');
    assert.equal(line?.bytesOut, size);
  });
}
