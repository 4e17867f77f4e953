// Static replicas (`replicas.urls`): a replica that refuses connections leaves the rotation at
// once and comes back when a probe answers; with every replica down the request ends in 502
// upstream_unavailable within milliseconds; `readyPath` is probed periodically.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import { findFreePort } from '../../src/control/sources/replica-process.js';
import { createReplicaSet, type ManagedReplicaSet } from '../../src/gateway/local-replica-set.js';
import type { Replica } from '../../src/relay/replica-set.js';
import { Recorder, TestWaiter, captureLogger, serviceConfig } from '../fixtures/replica-harness.js';
import { within } from '../helpers/wait.js';

interface Upstream {
  server: Server;
  port: number;
  healthy: boolean;
  /** /health answers after this long. */
  healthDelayMs: number;
  /** Called when a /health request arrives. */
  onHealth: () => void;
  close(): Promise<void>;
}

async function upstream(name: string, port = 0): Promise<Upstream> {
  const state: Upstream = {
    server: createServer((req, res) => {
      if (req.url === '/health') {
        state.onHealth();
        const answer = (): void => void res.writeHead(state.healthy ? 200 : 503).end();
        if (state.healthDelayMs > 0) setTimeout(answer, state.healthDelayMs);
        else answer();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end(name);
    }),
    port: 0,
    healthy: true,
    healthDelayMs: 0,
    onHealth: () => undefined,
    close: () =>
      new Promise<void>((resolve) => {
        state.server.closeAllConnections();
        state.server.close(() => resolve());
      }),
  };
  await new Promise<void>((resolve) => state.server.listen(port, '127.0.0.1', resolve));
  state.port = (state.server.address() as AddressInfo).port;
  return state;
}

function acquire(set: ManagedReplicaSet, exclude?: Replica): ReturnType<TestWaiter['got']> {
  const w = new TestWaiter();
  set.acquire(w, exclude);
  return w.got();
}

type RelayResult = { status: number; body: string; tried: string[] } | { code: string; status: number; tried: string[] };

/** What the relay does: acquire, send; on a refused connection release `unreachable` and retry once with `exclude`. */
async function relay(set: ManagedReplicaSet): Promise<RelayResult> {
  const tried: string[] = [];
  let exclude: Replica | undefined;
  for (let attempt = 0; attempt < 2; attempt++) {
    const outcome = acquire(set, exclude);
    assert.ok(outcome !== undefined, 'a static set answers acquire synchronously here');
    if (outcome.error !== undefined) return { code: outcome.error.code, status: outcome.error.status, tried };
    const r = outcome.replica;
    tried.push(r.id);
    try {
      const res = await request(r.origin + '/v1/x', { method: 'POST', body: '{}' });
      const body = await res.body.text();
      set.release(r, 'ok');
      return { status: res.statusCode, body, tried };
    } catch (err) {
      set.release(r, 'unreachable');
      assert.equal((err as { code?: string }).code, 'ECONNREFUSED');
      exclude = r;
    }
  }
  return { code: 'upstream_unavailable', status: 502, tried }; // the relay's own 502 after the retry
}

test('static: a replica that refuses connections leaves the rotation; every request ends on the live one; it comes back', async () => {
  const live = await upstream('live');
  const downPort = await findFreePort();
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ urls: [`http://127.0.0.1:${downPort}`, `http://127.0.0.1:${live.port}`], readyPath: undefined }),
    { logger, events, tuning: { recoveryProbeMs: 100 } },
  );
  let revived: Upstream | undefined;
  try {
    assert.deepEqual(
      set.snapshot().replicas.map((r) => [r.id, r.state]),
      [
        ['svc-1', 'ready'],
        ['svc-2', 'ready'],
      ],
      'static replicas are in rotation from the start',
    );
    const first = await relay(set);
    assert.deepEqual(first, { status: 200, body: 'live', tried: ['svc-1', 'svc-2'] }, 'refused, then retried on the live one');
    const out = await events.reached('unreachable', 'svc-1');
    assert.equal(out.from, 'ready');
    for (let i = 0; i < 10; i++) {
      const r = await relay(set);
      assert.deepEqual(r, { status: 200, body: 'live', tried: ['svc-2'] });
    }

    // The replica comes back: the TCP probe (no readyPath) puts it back in rotation.
    revived = await upstream('revived', downPort);
    await events.transitions.next(
      (t) => t.replica === 'svc-1' && t.from === 'unreachable' && t.to === 'ready',
      5_000,
      'svc-1 back in rotation',
    );
    // Both are in rotation again: two requests held at once go to both (least in flight).
    const a = acquire(set)!.replica!;
    const b = acquire(set)!.replica!;
    assert.deepEqual(new Set([a.id, b.id]), new Set(['svc-1', 'svc-2']));
    set.release(a, 'ok');
    set.release(b, 'ok');
  } finally {
    await set.close();
    await live.close();
    await revived?.close();
  }
});

test('static: with every replica down the request gets 502 upstream_unavailable at once', async () => {
  const ports = [await findFreePort(), await findFreePort()];
  const { logger } = captureLogger();
  const events = new Recorder();
  // A wait no test run outlasts: an answer at all means nothing waited for it.
  const set = createReplicaSet(serviceConfig({ urls: ports.map((p) => `http://127.0.0.1:${p}`) }, { maxWaitMs: 600_000 }), { logger, events });
  try {
    const first = await relay(set);
    assert.deepEqual(first, { code: 'upstream_unavailable', status: 502, tried: ['svc-1', 'svc-2'] });

    // Both are out of rotation now. The next request is still tried on the one that failed
    // longest ago (the probe may be stale), and fails with the set's own upstream_unavailable.
    const second = await relay(set);
    assert.deepEqual(second, { code: 'upstream_unavailable', status: 502, tried: ['svc-1'] });
    const w = new TestWaiter();
    const r = acquire(set)!.replica!;
    set.release(r, 'unreachable');
    set.acquire(w, r);
    const error = w.got()?.error;
    assert.equal(error?.code, 'upstream_unavailable');
    assert.equal(error?.status, 502);
    assert.equal(error?.retryable, false);
    assert.ok(w.got() !== undefined, 'no waiting: answered within acquire()');
    assert.equal(set.snapshot().queued, 0, 'a static set never queues for a cold start');
  } finally {
    await set.close();
  }
});

test('static with readyPath: a failing periodic probe takes the replica out, a succeeding one puts it back', async () => {
  const up = await upstream('only');
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ urls: [`http://127.0.0.1:${up.port}`], readyPath: '/health' }), {
    logger,
    events,
    tuning: { probeIntervalMs: 100, recoveryProbeMs: 100 },
  });
  try {
    up.healthy = false;
    const out = await events.reached('unreachable', 'svc-1', 5_000);
    assert.equal(out.from, 'ready');
    // Nothing in rotation: the request is still handed the replica (it may well answer).
    const r = await relay(set);
    assert.deepEqual(r, { status: 200, body: 'only', tried: ['svc-1'] });
    up.healthy = true;
    await events.transitions.next(
      (t) => t.replica === 'svc-1' && t.from === 'unreachable' && t.to === 'ready',
      5_000,
      'svc-1 back in rotation',
    );
  } finally {
    await set.close();
    await up.close();
  }
});

test('regression: a replica taken out while a periodic probe is in flight still gets probed back in', async () => {
  const up = await upstream('only');
  up.healthDelayMs = 300;
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ urls: [`http://127.0.0.1:${up.port}`], readyPath: '/health' }), {
    logger,
    events,
    tuning: { probeIntervalMs: 50, recoveryProbeMs: 50 },
  });
  try {
    // Wait until a periodic probe is out, then report the replica unreachable meanwhile.
    await within(new Promise<void>((resolve) => (up.onHealth = resolve)), 5_000, 'a periodic probe');
    up.onHealth = () => undefined;
    const r = acquire(set)!.replica!;
    set.release(r, 'unreachable');
    await events.transitions.next((t) => t.from === 'ready' && t.to === 'unreachable', 5_000, 'taken out');
    await events.transitions.next((t) => t.from === 'unreachable' && t.to === 'ready', 5_000, 'probed back in');
  } finally {
    await set.close();
    await up.close();
  }
});

test('static with concurrency 1: a second request waits in the queue for the slot', async () => {
  const up = await upstream('only');
  const { logger } = captureLogger();
  const set = createReplicaSet(serviceConfig({ urls: [`http://127.0.0.1:${up.port}`], concurrency: 1 }), { logger });
  try {
    const a = new TestWaiter(1);
    const b = new TestWaiter(2);
    set.acquire(a);
    set.acquire(b);
    assert.ok(a.got()?.replica !== undefined);
    assert.equal(b.got(), undefined);
    set.release(a.got()!.replica!, 'ok');
    const granted = await within(b.settled, 5_000, 'the slot');
    assert.equal(granted.replica?.id, 'svc-1');
    set.release(granted.replica!, 'ok');
  } finally {
    await set.close();
    await up.close();
  }
});
