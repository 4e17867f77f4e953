// Scaling of a launched service: idle replicas are stopped (never below `min`), more replicas
// start while every ready one is at its `concurrency` (up to `max`), and a replica whose process
// dies is replaced when needed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { createReplicaSet } from '../../src/gateway/local-replica-set.js';
import type { Replica } from '../../src/relay/replica-set.js';
import { Recorder, TestWaiter, captureLogger, pidAlive, serverCommand, serviceConfig } from '../fixtures/replica-harness.js';
import { within } from '../helpers/wait.js';

/**
 * Waits for a witness: a replica of another set, released at once, stopped after `idleMs` idle.
 * Timers run in deadline order, so every idle check the set under test armed before then has run.
 */
async function idlePeriodsPass(idleMs: number): Promise<void> {
  const { logger } = captureLogger();
  const events = new Recorder();
  const peer = createReplicaSet(serviceConfig({ command: serverCommand(), idleTimeoutMs: idleMs }, {}, 'witness'), { logger, events });
  try {
    const w = new TestWaiter();
    peer.acquire(w);
    const { replica } = await within(w.settled, 30_000, 'the witness replica');
    assert.ok(replica !== undefined);
    peer.release(replica, 'ok');
    await events.reached('stopped', undefined, 30_000);
  } finally {
    await peer.close();
  }
}

async function pidOf(replica: Replica): Promise<number> {
  const res = await request(replica.origin + '/whoami', { method: 'POST', body: '' });
  return ((await res.body.json()) as { pid: number }).pid;
}

test('an idle replica is stopped after idleTimeoutMs, and a later request cold-starts a new one', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ command: serverCommand(), idleTimeoutMs: 300 }), { logger, events });
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const first = await within(w.settled, 10_000, 'grant');
    assert.ok(first.replica !== undefined);
    const pid = await pidOf(first.replica);
    const releasedAt = performance.now();
    set.release(first.replica, 'ok');

    const draining = await events.reached('draining', 'svc-1');
    assert.equal(draining.from, 'ready');
    assert.ok(performance.now() - releasedAt >= 290, 'not stopped before idleTimeoutMs');
    await events.reached('stopped', 'svc-1');
    assert.equal(pidAlive(pid), false, 'the idle process is gone');
    assert.equal(set.snapshot().replicas.length, 0);

    const w2 = new TestWaiter();
    set.acquire(w2);
    const second = await within(w2.settled, 10_000, 'cold start again');
    assert.equal(second.replica?.id, 'svc-2');
    assert.notEqual(await pidOf(second.replica!), pid);
    set.release(second.replica!, 'ok');
  } finally {
    await set.close();
  }
});

test('a replica with requests in flight is never idle-stopped', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ command: serverCommand(), idleTimeoutMs: 150 }), { logger, events });
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const { replica } = await within(w.settled, 10_000, 'grant');
    assert.ok(replica !== undefined);
    // Held across several idle periods: a witness replica idle for 600 ms was stopped meanwhile.
    await idlePeriodsPass(600);
    assert.equal(events.transitions.items.some((t) => t.to === 'draining'), false);
    const releasedAt = performance.now();
    set.release(replica, 'ok');
    await events.reached('stopped', 'svc-1');
    assert.ok(performance.now() - releasedAt >= 140, 'idle time counts from the last release');
  } finally {
    await set.close();
  }
});

test('concurrency 2, max 3: six held requests start three replicas; the seventh waits for a slot; min stays', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: '200' }, concurrency: 2, max: 3, min: 1, idleTimeoutMs: 400 }),
    { logger, events },
  );
  try {
    // min 1: one replica starts at creation.
    await events.reached('ready', 'svc-1');
    const six = Array.from({ length: 6 }, (_, n) => new TestWaiter(n));
    for (const w of six) set.acquire(w);
    const outcomes = await within(Promise.all(six.map((w) => w.settled)), 15_000, 'six grants');
    assert.deepEqual(events.created(), ['svc-1', 'svc-2', 'svc-3'], 'three processes, no more');
    const perReplica = new Map<string, number>();
    for (const o of outcomes) {
      assert.ok(o.replica !== undefined);
      perReplica.set(o.replica.id, (perReplica.get(o.replica.id) ?? 0) + 1);
    }
    assert.deepEqual([...perReplica.values()], [2, 2, 2], 'two per replica: concurrency is respected');
    const pids = await Promise.all(outcomes.filter((_, i) => i % 2 === 0).map((o) => pidOf(o.replica!)));
    assert.equal(new Set(pids).size, 3);

    const seventh = new TestWaiter(7);
    set.acquire(seventh);
    assert.equal(seventh.outcome, undefined, 'every replica is at its limit and max is reached: it waits');
    assert.equal(events.created().length, 3, 'no fourth replica beyond max');
    const freed = outcomes[3]!.replica!;
    set.release(freed, 'ok');
    assert.equal(seventh.got()?.replica, freed, 'the freed slot goes to the queued waiter synchronously');

    // Release everything: two replicas go idle and stop, `min` keeps one.
    for (const [i, o] of outcomes.entries()) if (i !== 3) set.release(o.replica!, 'ok');
    set.release(seventh.got()!.replica!, 'ok');
    await events.transitions.count((t) => t.to === 'stopped', 2, 10_000, 'two idle stops');
    // Two more idle periods (a witness replica idle for 800 ms was stopped meanwhile): the last one stays for `min`.
    await idlePeriodsPass(800);
    const left = set.snapshot().replicas;
    assert.equal(left.length, 1, 'min replicas remain');
    assert.equal(left[0]!.state, 'ready');
    assert.equal(events.transitions.items.filter((t) => t.to === 'stopped').length, 2);
    const alive = pids.filter(pidAlive);
    assert.equal(alive.length, 1, 'exactly one replica process is left running');
  } finally {
    await set.close();
  }
});

test('a ready replica whose process is killed is replaced when a request needs it', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ command: serverCommand() }), { logger, events });
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const { replica } = await within(w.settled, 10_000, 'grant');
    assert.ok(replica !== undefined);
    const pid = await pidOf(replica);
    process.kill(pid, 'SIGKILL');
    const failed = await events.reached('failed', 'svc-1');
    assert.equal(failed.from, 'ready');
    // The request in flight fails on its own; its release is harmless.
    set.release(replica, 'failed');
    assert.equal(replica.inflight, 0);
    assert.equal(set.snapshot().replicas.length, 0, 'the dead replica holds no slot');
    assert.equal(events.created().length, 1, 'no replacement while nobody needs one (min 0)');

    const w2 = new TestWaiter();
    set.acquire(w2);
    const second = await within(w2.settled, 10_000, 'replacement');
    assert.equal(second.replica?.id, 'svc-2');
    assert.notEqual(await pidOf(second.replica!), pid);
    set.release(second.replica!, 'ok');
  } finally {
    await set.close();
  }
});

test('with min 1, a replica whose process dies is replaced on its own', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ command: serverCommand(), min: 1 }), { logger, events });
  try {
    await events.reached('ready', 'svc-1');
    const w = new TestWaiter();
    set.acquire(w);
    const { replica } = await w.settled;
    const pid = await pidOf(replica!);
    set.release(replica!, 'ok');
    process.kill(pid, 'SIGKILL');
    await events.reached('failed', 'svc-1');
    await events.reached('ready', 'svc-2');
    assert.equal(set.snapshot().replicas.length, 1);
  } finally {
    await set.close();
  }
});

test('the retry after a refused connection waits for a launched replica instead of failing at once', async () => {
  // A launched replica that refuses a connection is usually exiting; the relay's retry (acquire
  // with `exclude`) queues like a cold start and is served when a replica is ready again.
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ command: serverCommand() }), { logger, events });
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const { replica } = await within(w.settled, 10_000, 'grant');
    assert.ok(replica !== undefined);
    set.release(replica, 'unreachable');
    const retry = new TestWaiter();
    set.acquire(retry, replica);
    assert.equal(retry.got(), undefined, 'queued, not failed with upstream_unavailable');
    assert.equal(set.snapshot().queued, 1);
    // The replica is alive: its recovery probe puts it back in rotation and the retry is granted.
    const granted = await within(retry.settled, 10_000, 'the queued retry to be granted');
    assert.equal(granted.replica?.id, replica.id);
    set.release(granted.replica!, 'ok');
  } finally {
    await set.close();
  }
});
