// A launched replica that fails to start: every queued waiter gets 503 no_replica promptly, the
// next request tries again after a short backoff, and a start timeout kills the process.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createReplicaSet } from '../../src/gateway/local-replica-set.js';
import { Recorder, TestWaiter, captureLogger, fixture, pidAlive, serverCommand, serviceConfig } from '../fixtures/replica-harness.js';
import { within } from '../helpers/wait.js';

test('a command that exits at once: every queued waiter gets no_replica on the exit, not at the start timeout; the next request starts again', async () => {
  const { logger, records } = captureLogger();
  const events = new Recorder();
  // A start timeout no test run reaches: any answer at all comes from the exit.
  const set = createReplicaSet(serviceConfig({ command: [process.execPath, fixture('exit-at-once')], startTimeoutMs: 600_000 }), { logger, events });
  try {
    const started = performance.now();
    const waiters = Array.from({ length: 20 }, (_, n) => new TestWaiter(n));
    for (const w of waiters) set.acquire(w);
    const outcomes = await within(Promise.all(waiters.map((w) => w.settled)), 60_000, 'no_replica for all');
    const elapsed = performance.now() - started;
    for (const o of outcomes) {
      assert.equal(o.error?.code, 'no_replica');
      assert.equal(o.error?.status, 503);
      assert.ok(Number(o.error?.headers?.['retry-after']) >= 1, 'Retry-After in whole seconds');
    }
    console.log(`exit at once: 20 queued waiters answered no_replica ${elapsed.toFixed(1)} ms after the first acquire`);
    const failed = await events.reached('failed', 'svc-1');
    assert.equal(failed.from, 'starting');
    const line = await records.next((r) => r.msg === 'replica state' && r['to'] === 'failed');
    assert.equal(line['code'], 3);
    assert.ok(String(line['output']).includes('cannot load model'), 'the failure log carries the last output lines');
    assert.equal(events.waits.filter((w) => w.outcome === 'failed').length, 20);

    // The next request (inside the backoff) queues, a second start happens, and fails it too.
    const again = new TestWaiter(99);
    set.acquire(again);
    assert.equal(again.outcome, undefined, 'queued during the backoff, not failed at once');
    const second = await within(again.settled, 60_000, 'second attempt');
    assert.equal(second.error?.code, 'no_replica');
    assert.deepEqual(events.created(), ['svc-1', 'svc-2'], 'the later request started a second replica');
    assert.equal(set.snapshot().replicas.length, 0, 'failed replicas hold no slot');
  } finally {
    await set.close();
  }
});

test('a request arriving during the backoff is served when the next start succeeds', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-replica-'));
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { FAIL_IF_MISSING: join(dir, 'started-once') } }),
    { logger, events, tuning: { backoffBaseMs: 400 } },
  );
  try {
    const first = new TestWaiter(1);
    set.acquire(first);
    assert.equal((await within(first.settled, 60_000, 'first start failing')).error?.code, 'no_replica');
    const failedAt = performance.now();
    const next = new TestWaiter(2);
    set.acquire(next);
    const outcome = await within(next.settled, 10_000, 'second start');
    assert.ok(outcome.replica !== undefined, `served, not ${outcome.error?.code}`);
    assert.equal(outcome.replica.id, 'svc-2');
    assert.ok(performance.now() - failedAt >= 350, 'the second start waited for the backoff');
    set.release(outcome.replica, 'ok');
  } finally {
    await set.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a command that cannot be spawned fails the queue promptly', async () => {
  const { logger } = captureLogger();
  // A start timeout no test run reaches: any answer at all comes from the failed spawn.
  const set = createReplicaSet(serviceConfig({ command: ['/nonexistent/sluice-replica', '--port', '{port}'], startTimeoutMs: 600_000 }), { logger });
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const outcome = await within(w.settled, 60_000, 'spawn failure');
    assert.equal(outcome.error?.code, 'no_replica');
  } finally {
    await set.close();
  }
});

test('startTimeoutMs: a replica that never becomes ready is failed and its process killed', async () => {
  const { logger, records } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: '60000' }, startTimeoutMs: 500 }),
    { logger, events, tuning: { stopGraceMs: 1_000 } },
  );
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const spawned = await records.next((r) => r.msg === 'replica process spawned');
    const pid = spawned['pid'] as number;
    assert.ok(pidAlive(pid));
    const outcome = await within(w.settled, 60_000, 'start timeout');
    assert.equal(outcome.error?.code, 'no_replica');
    const failed = await events.reached('failed');
    assert.equal(failed.from, 'starting');
    assert.ok(failed.ms >= 490, `failed after ${failed.ms} ms in starting`);
    // The slot is freed only when the process has exited.
    await records.next((r) => r.msg === 'replica process exited', 5_000, 'the timed-out process exiting');
    assert.equal(pidAlive(pid), false, 'the timed-out process is gone');
    assert.equal(set.snapshot().replicas.length, 0);
  } finally {
    await set.close();
  }
});

test('a replica whose readiness probe fails for a while is not ready until it answers 2xx', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(serviceConfig({ command: serverCommand(), env: { HEALTH_FAIL_MS: '400' } }), {
    logger,
    events,
  });
  try {
    const w = new TestWaiter();
    set.acquire(w);
    const outcome = await within(w.settled, 10_000, 'grant');
    assert.ok(outcome.replica !== undefined);
    const ready = await events.reached('ready');
    assert.ok(ready.ms >= 400, `starting lasted ${ready.ms} ms, through the 503 answers`);
    set.release(outcome.replica, 'ok');
  } finally {
    await set.close();
  }
});
