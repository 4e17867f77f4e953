// The control plane with two data plane views (threads 0 and 1) over one shared slot table, in
// one thread so the test can stop "thread 0" at any point: concurrency holds across the views,
// the queue is one FIFO for both, and when thread 0 dies holding a slot and a queued request,
// `threadGone` gives the slot to the request waiting on thread 1 and drops thread 0's waiter.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { kindOf } from '../../src/control/kinds/kinds.js';
import { ServiceControl } from '../../src/control/service/service-control.js';
import { DEFAULT_TUNING } from '../../src/control/service/tuning.js';
import { ReplicaView } from '../../src/data/replica-view.js';
import { SlotTable } from '../../src/replicas/slots.js';
import type { ViewLink } from '../../src/threads/link.js';
import { serviceConfig, TestWaiter } from '../fixtures/replica-harness.js';

const logger = pino({ level: 'silent' });

function twoThreads(concurrency: number): { control: ServiceControl; views: ReplicaView[]; alive: boolean[] } {
  const service = serviceConfig({ urls: ['http://127.0.0.1:9'], concurrency, readyPath: undefined });
  const views: ReplicaView[] = [];
  const alive = [true, true];
  const control = new ServiceControl(service, {
    logger,
    kind: kindOf(service),
    threads: 2,
    views: {
      get: (thread): ViewLink | undefined => (alive[thread] ? views[thread] : undefined),
      all: () => views.filter((_, i) => alive[i]),
    },
  });
  for (let thread = 0; thread < 2; thread++) {
    const view = new ReplicaView(service, new SlotTable(control.slots.init), thread, control, false, logger, DEFAULT_TUNING.poolCloseMs);
    for (const info of control.replicas()) view.announce(info);
    views.push(view);
  }
  return { control, views, alive };
}

test('concurrency holds across threads and a dead thread gives back its slot and its queued requests', async () => {
  const { control, views, alive } = twoThreads(1);
  try {
    const held = new TestWaiter(0);
    views[0]!.acquire(held);
    assert.ok(held.got()?.replica, 'thread 0 took the one slot without a message');
    const queued0 = new TestWaiter(1);
    const queued1 = new TestWaiter(2);
    views[0]!.acquire(queued0);
    views[1]!.acquire(queued1);
    assert.equal(queued0.got(), undefined);
    assert.equal(queued1.got(), undefined, 'thread 1 finds no room: the slot is counted for every thread');
    assert.equal(control.snapshot().queued, 2);
    assert.equal(control.slots.queued, 2);

    // Thread 0 dies with its request in flight and one queued.
    alive[0] = false;
    assert.equal(control.threadGone(0), 1, 'the slot thread 0 held is given back');
    assert.ok(queued1.got()?.replica, 'the request waiting on thread 1 got it');
    assert.equal(queued0.got(), undefined, "the dead thread's waiter got nothing");
    assert.equal(control.snapshot().queued, 0, "the dead thread's waiter left the queue");
    assert.equal(control.slots.queued, 0);
    assert.equal(control.snapshot().replicas[0]!.inflight, 1, 'only thread 1 holds a request now');

    views[1]!.release(queued1.got()!.replica!, 'ok');
    assert.equal(control.snapshot().replicas[0]!.inflight, 0);
  } finally {
    await control.close();
    await Promise.all(views.map((view) => view.close()));
  }
});

test('a released slot goes to the oldest waiter, whichever thread queued it', async () => {
  const { control, views } = twoThreads(1);
  try {
    const first = new TestWaiter(0);
    views[1]!.acquire(first);
    const waiters = [new TestWaiter(1), new TestWaiter(2), new TestWaiter(3)];
    views[0]!.acquire(waiters[0]!);
    views[1]!.acquire(waiters[1]!);
    views[0]!.acquire(waiters[2]!);
    // A new request on thread 1 queues behind them although it could race for the slot.
    const late = new TestWaiter(4);
    let current = first;
    for (let i = 0; i < 3; i++) {
      const owner = i === 0 ? 1 : i === 1 ? 0 : 1;
      if (i === 0) views[1]!.acquire(late);
      views[owner]!.release(current.got()!.replica!, 'ok');
      assert.ok(waiters[i]!.got()?.replica, `waiter ${i} is served next`);
      for (const w of waiters.slice(i + 1)) assert.equal(w.got(), undefined);
      assert.equal(late.got(), undefined, 'the late request waits its turn');
      current = waiters[i]!;
    }
    views[0]!.release(current.got()!.replica!, 'ok');
    assert.ok(late.got()?.replica, 'then the late one');
  } finally {
    await control.close();
    await Promise.all(views.map((view) => view.close()));
  }
});
