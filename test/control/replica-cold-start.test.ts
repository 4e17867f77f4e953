// Cold start of a launched service: a burst waits in FIFO order for ONE replica process, the
// queue's bound and deadline answer 503 with Retry-After, a cancelled waiter is never served,
// and queued requests go out as soon as the replica answers its readiness probe (in the same turn
// of the event loop: before any timer or poll could run).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { createReplicaSet } from '../../src/gateway/local-replica-set.js';
import { Recorder, TestWaiter, captureLogger, fixtureEvent, median, pidAlive, serverCommand, serviceConfig } from '../fixtures/replica-harness.js';
import { within } from '../helpers/wait.js';

test('a burst of 200 on a cold service starts exactly one replica and is served in FIFO order', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: '1500' }, max: 1 }),
    { logger, events },
  );
  try {
    const order: number[] = [];
    const waiters = Array.from({ length: 200 }, (_, n) => new TestWaiter(n, (w) => order.push(w.n)));
    for (const w of waiters) set.acquire(w);
    assert.equal(set.snapshot().queued, 200, 'all 200 are queued while the replica starts');
    assert.equal(events.created().length, 1, 'one replica is starting');

    const outcomes = await within(Promise.all(waiters.map((w) => w.settled)), 20_000, '200 grants');
    for (const o of outcomes) assert.ok(o.replica !== undefined, `granted, not ${o.error?.code}`);
    assert.deepEqual(order, waiters.map((w) => w.n), 'granted in arrival order');
    assert.equal(events.created().length, 1, 'exactly one replica process was started');
    const replica = outcomes[0]!.replica!;
    assert.ok(outcomes.every((o) => o.replica === replica));
    assert.equal(replica.inflight, 200);
    assert.match(replica.host, /^127\.0\.0\.1:\d+$/);
    assert.equal(replica.origin, `http://${replica.host}`);
    assert.equal(replica.id, 'svc-1');
    assert.equal(events.coldStarts.length, 1);
    assert.ok(events.coldStarts[0]!.ms >= 1400, `cold start took ${events.coldStarts[0]!.ms} ms`);
    const granted = events.waits.filter((w) => w.outcome === 'granted');
    assert.equal(granted.length, 200);
    assert.equal(events.depths.at(-1), 0, 'the last reported depth is 0');

    // The replica answers real requests through its pool.
    const res = await request(replica.origin + '/v1/x', { method: 'POST', body: '{}' });
    const body = (await res.body.json()) as { pid: number };
    assert.equal(res.statusCode, 200);
    for (const w of waiters) set.release(w.outcome!.replica!, 'ok');
    assert.equal(replica.inflight, 0);

    await set.close();
    assert.equal(pidAlive(body.pid), false, 'close() leaves no replica process');
  } finally {
    await set.close();
  }
});

test('over queue.maxRequests the request gets 503 queue_full with Retry-After, at once', async () => {
  const { logger } = captureLogger();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: '60000' } }, { maxRequests: 5 }),
    { logger },
  );
  try {
    const queued = Array.from({ length: 5 }, (_, n) => new TestWaiter(n));
    for (const w of queued) set.acquire(w);
    const sixth = new TestWaiter(6);
    set.acquire(sixth);
    assert.ok(sixth.outcome !== undefined, 'answered synchronously');
    assert.equal(sixth.outcome.error?.code, 'queue_full');
    assert.equal(sixth.outcome.error?.status, 503);
    assert.equal(sixth.outcome.error?.headers?.['retry-after'], '1');
    assert.ok(queued.every((w) => w.outcome === undefined), 'the five queued ones still wait');

    set.drain();
    for (const w of queued) assert.equal(w.outcome?.error?.code, 'draining', 'drain answers every queued waiter');
    const late = new TestWaiter(7);
    set.acquire(late);
    assert.equal(late.outcome?.error?.code, 'draining');
  } finally {
    await set.close();
  }
});

test('a waiter not served within queue.maxWaitMs gets 503 no_replica with Retry-After', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: '60000' } }, { maxWaitMs: 300 }),
    { logger, events },
  );
  try {
    const started = performance.now();
    const waiters = [new TestWaiter(1), new TestWaiter(2), new TestWaiter(3)];
    for (const w of waiters) set.acquire(w);
    const outcomes = await within(Promise.all(waiters.map((w) => w.settled)), 10_000, 'expiry');
    const elapsed = performance.now() - started;
    for (const o of outcomes) {
      assert.equal(o.error?.code, 'no_replica');
      assert.equal(o.error?.status, 503);
      assert.ok(o.error?.headers?.['retry-after'] !== undefined, 'Retry-After is set');
    }
    assert.ok(elapsed >= 290, `expired after ${elapsed} ms, not before maxWaitMs`);
    assert.equal(events.waits.filter((w) => w.outcome === 'expired').length, 3);
    assert.equal(set.snapshot().queued, 0);
  } finally {
    await set.close();
  }
});

test('a cancelled waiter leaves the queue and is never handed a replica', async () => {
  const { logger } = captureLogger();
  const events = new Recorder();
  const set = createReplicaSet(
    serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: '300' } }),
    { logger, events },
  );
  try {
    const [a, b, c] = [new TestWaiter(1), new TestWaiter(2), new TestWaiter(3)];
    set.acquire(a);
    set.acquire(b);
    set.acquire(c);
    assert.equal(set.cancel(b), true);
    assert.equal(set.cancel(b), false, 'a second cancel finds nothing');
    assert.equal(set.snapshot().queued, 2);
    const [oa, oc] = await within(Promise.all([a.settled, c.settled]), 15_000, 'grants');
    assert.ok(oa.replica !== undefined && oc.replica !== undefined);
    assert.equal(b.calls, 0, 'the cancelled waiter was never called');
    assert.equal(oa.replica.inflight, 2, 'only the two remaining waiters count');
    assert.equal(events.waits.filter((w) => w.outcome === 'cancelled').length, 1);
    set.release(oa.replica, 'ok');
    set.release(oc.replica, 'ok');
  } finally {
    await set.close();
  }
});

/** A Recorder that notes, one check-phase turn after each `ready` transition, whether `waiters` were all granted by then. */
class ReadyWitness extends Recorder {
  readonly grantedByThen: boolean[] = [];
  waiters: TestWaiter[] = [];
  override replicaState(...args: Parameters<Recorder['replicaState']>): void {
    super.replicaState(...args);
    if (args[3] === 'ready') setImmediate(() => this.grantedByThen.push(this.waiters.every((w) => w.got()?.replica !== undefined)));
  }
}

test('readiness → grant: queued requests go out in the turn the readiness answer arrives (timings printed)', async () => {
  const runs = Number(process.env['LATENCY_RUNS'] ?? '7');
  const probeToGrant: number[] = [];
  const listenToGrant: number[] = [];
  for (let run = 0; run < runs; run++) {
    const { logger, records } = captureLogger();
    const events = new ReadyWitness();
    const set = createReplicaSet(
      serviceConfig({ command: serverCommand(), env: { START_DELAY_MS: String(150 + run * 37) } }),
      { logger, events },
    );
    try {
      const waiters = [new TestWaiter(1), new TestWaiter(2), new TestWaiter(3)];
      events.waiters = waiters;
      for (const w of waiters) set.acquire(w);
      const first = await within(waiters[0]!.settled, 15_000, 'grant');
      assert.ok(first.replica !== undefined);
      await events.transitions.next((t) => t.to === 'ready');
      await new Promise((resolve) => setImmediate(resolve));
      // Order, not time: a grant left to a timer or a later poll would come after this check.
      assert.deepEqual(events.grantedByThen, [true], `run ${run}: every waiter was granted before the loop turned after 'ready'`);
      const health = fixtureEvent(await records.next((r) => fixtureEvent(r, 'health-ok') !== undefined), 'health-ok')!;
      const listening = fixtureEvent(await records.next((r) => fixtureEvent(r, 'listening') !== undefined), 'listening')!;
      probeToGrant.push(first.at - health.t);
      listenToGrant.push(first.at - listening.t);
      for (const w of waiters) set.release(w.outcome!.replica!, 'ok');
    } finally {
      await set.close();
    }
  }
  const fmt = (xs: number[]): string => xs.map((x) => x.toFixed(2)).join(', ');
  console.log(
    `readiness answer → first queued grant: median ${median(probeToGrant).toFixed(2)} ms over ${runs} runs [${fmt(probeToGrant)}]`,
  );
  console.log(
    `replica listening → first queued grant (includes the poll interval): median ${median(listenToGrant).toFixed(2)} ms [${fmt(listenToGrant)}]`,
  );
});
