// Shutdown: drain() answers queued waiters with 503 draining while in-flight requests go on;
// close() stops every replica process (SIGKILL after the grace if SIGTERM is ignored) and awaits
// the exits; and a gateway that dies without close() takes its replica processes with it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { request } from 'undici';
import { createReplicaSet } from '../../src/gateway/local-replica-set.js';
import { Recorder, TestWaiter, captureLogger, fixture, pidAlive, serverCommand, serviceConfig } from '../fixtures/replica-harness.js';
import { eventually, within } from '../helpers/wait.js';

test('close() stops every replica process, even one that ignores SIGTERM, and awaits the exits', async () => {
  const { logger, records } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { IGNORE_SIGTERM: '1' }, min: 2, max: 3, concurrency: 1 }),
    { logger, events, tuning: { stopGraceMs: 300 } },
  );
  let closed = false;
  try {
    await events.transitions.count((t) => t.to === 'ready', 2, 15_000, 'two min replicas ready');
    // A third one is still starting (it would take a minute) when close() is called.
    const held = [new TestWaiter(1), new TestWaiter(2)];
    for (const w of held) set.acquire(w);
    const third = new TestWaiter(3);
    set.acquire(third);
    await records.next((r) => r.msg === 'replica process spawned' && r['replica'] === 'svc-3');
    const pids = set.snapshot().replicas.map((r) => r.pid);
    assert.equal(pids.length, 3);
    assert.ok(pids.every((pid) => pid !== undefined && pidAlive(pid)));

    const started = performance.now();
    await within(set.close(), 10_000, 'close()');
    closed = true;
    const took = performance.now() - started;
    for (const pid of pids) assert.equal(pidAlive(pid!), false, `replica process ${pid} is gone after close()`);
    assert.ok(took >= 280, `SIGKILL came after the grace (${took.toFixed(0)} ms)`);
    assert.equal(third.got()?.error?.code, 'draining', 'the queued waiter was answered');
    assert.equal(set.snapshot().replicas.length, 0);
    assert.ok(records.items.some((r) => r.msg === 'replica ignored SIGTERM; sending SIGKILL'));
    for (const id of ['svc-1', 'svc-2', 'svc-3']) await events.reached('stopped', id);
  } finally {
    if (!closed) await set.close();
  }
});

test('close() right after creation: a replica caught between port and spawn is never spawned', async () => {
  const { logger, records } = captureLogger();
  const set = createReplicaSet(serviceConfig({ command: serverCommand(), min: 1 }), { logger });
  await set.close();
  assert.equal(records.items.some((r) => r.msg === 'replica process spawned'), false);
  assert.equal(set.snapshot().replicas.length, 0);
});

test('drain(): queued waiters get 503 draining, new ones too, in-flight requests go on', async () => {
  const { logger } = captureLogger();
  const set = createReplicaSet(serviceConfig({ command: serverCommand(), concurrency: 1 }), { logger });
  try {
    const first = new TestWaiter(1);
    const queued = new TestWaiter(2);
    set.acquire(first);
    set.acquire(queued);
    const { replica } = await within(first.settled, 10_000, 'grant');
    assert.ok(replica !== undefined);
    assert.equal(queued.got(), undefined, 'concurrency 1: the second one waits');

    set.drain();
    assert.equal(queued.got()?.error?.code, 'draining');
    assert.equal(queued.got()?.error?.status, 503);
    const late = new TestWaiter(3);
    set.acquire(late);
    assert.equal(late.got()?.error?.code, 'draining');

    // The request in flight still reaches its replica.
    const res = await request(replica.origin + '/x', { method: 'POST', body: '' });
    assert.equal(res.statusCode, 200);
    await res.body.dump();
    set.release(replica, 'ok');
    assert.equal(queued.calls, 1, 'a drained waiter is answered exactly once');
  } finally {
    await set.close();
  }
});

for (const mode of ['exit', 'throw'] as const) {
  test(`a gateway that dies (${mode}) without close() leaves no replica process behind`, async () => {
    const child = spawn(process.execPath, [fixture('gateway-exits'), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.resume();
    const code = await within(
      new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c))),
      15_000,
      'the gateway fixture exiting',
    );
    assert.equal(code, mode === 'exit' ? 0 : 1);
    const line = out.split('\n').find((l) => l.includes('replicaPid'));
    assert.ok(line !== undefined, `the fixture reported its replica: ${out}`);
    const pid = (JSON.parse(line) as { replicaPid: number }).replicaPid;
    assert.ok(pid > 0);
    // SIGKILL was sent synchronously before the gateway exited; the kernel reaps it (a poll).
    await eventually(() => !pidAlive(pid), 30_000, `replica ${pid} to die with its gateway`);
  });
}
