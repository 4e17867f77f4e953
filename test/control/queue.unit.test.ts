// The waiter queue on its own: FIFO order, bound, O(1) removal, and deadlines served by one timer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WaiterQueue } from '../../src/control/service/queue.js';
import { TestWaiter } from '../fixtures/replica-harness.js';
import { within } from '../helpers/wait.js';

test('queue: FIFO order, bound, remove from the middle', () => {
  const expired: TestWaiter[] = [];
  const q = new WaiterQueue(3, 60_000, (w) => expired.push(w as TestWaiter));
  const [a, b, c, d] = [new TestWaiter(1), new TestWaiter(2), new TestWaiter(3), new TestWaiter(4)];
  assert.equal(q.push(a), true);
  assert.equal(q.push(b), true);
  assert.equal(q.push(c), true);
  assert.equal(q.push(d), false, 'the fourth waiter is over maxRequests');
  assert.equal(q.size, 3);
  assert.ok(q.remove(b), 'b is removed from the middle');
  assert.equal(q.remove(b), undefined, 'a second remove finds nothing');
  assert.equal(q.push(d), true, 'room again after the removal');
  assert.equal(q.shift()?.waiter, a);
  assert.equal(q.shift()?.waiter, c);
  assert.equal(q.shift()?.waiter, d);
  assert.equal(q.shift(), undefined);
  assert.equal(q.size, 0);
  assert.deepEqual(expired, []);
});

test('queue: removing the head and the tail keeps the links right', () => {
  const q = new WaiterQueue(10, 60_000, () => undefined);
  const ws = [1, 2, 3, 4].map((n) => new TestWaiter(n));
  for (const w of ws) q.push(w);
  assert.ok(q.remove(ws[0]!));
  assert.ok(q.remove(ws[3]!));
  const extra = new TestWaiter(5);
  q.push(extra);
  const order: number[] = [];
  q.clear((e) => order.push((e.waiter as TestWaiter).n));
  assert.deepEqual(order, [2, 3, 5]);
  assert.equal(q.size, 0);
});

test('queue: waiters expire in arrival order at maxWaitMs; a removed one never expires', async () => {
  const expired: { n: number; waited: number }[] = [];
  let done!: () => void;
  const allExpired = new Promise<void>((resolve) => (done = resolve));
  const q = new WaiterQueue(100, 150, (w, waited) => {
    expired.push({ n: (w as TestWaiter).n, waited });
    if (expired.length === 3) done();
  });
  const ws = [1, 2, 3, 4].map((n) => new TestWaiter(n));
  const t0 = performance.timeOrigin + performance.now();
  q.push(ws[0]!, t0);
  q.push(ws[1]!, t0);
  // The later ones arrive 40 ms later (their arrival time given, not slept for): their deadlines are later too.
  q.push(ws[2]!, t0 + 40);
  q.push(ws[3]!, t0 + 40);
  q.remove(ws[1]!);
  await within(allExpired, 5_000, 'three waiters expiring');
  assert.deepEqual(
    expired.map((e) => e.n),
    [1, 3, 4],
  );
  for (const e of expired) assert.ok(e.waited >= 149, `waited ${e.waited} ms, at least maxWaitMs`);
  assert.equal(q.size, 0);
});

test('queue: an expiry callback may push a new waiter, which gets its own full wait', async () => {
  let second!: (waited: number) => void;
  const secondExpired = new Promise<number>((resolve) => (second = resolve));
  const first = new TestWaiter(1);
  const q: WaiterQueue = new WaiterQueue(10, 80, (w, waited) => {
    if (w === first) q.push(new TestWaiter(2));
    else second(waited);
  });
  q.push(first);
  const waited = await within(secondExpired, 5_000, 'the re-queued waiter expiring');
  assert.ok(waited >= 79, `waited ${waited} ms`);
});

test('queue: the same waiter cannot be queued twice', () => {
  const q = new WaiterQueue(10, 60_000, () => undefined);
  const w = new TestWaiter();
  q.push(w);
  assert.throws(() => q.push(w), /already queued/);
  q.clear(() => undefined);
});

// ── priorities, per-waiter deadlines, displacement ─────────────────────────────────────────────

test('queue: highest priority first, arrival order among equals, whatever the order of pushes', () => {
  const q = new WaiterQueue<string>(100, 60_000, () => undefined);
  // Arrival times deliberately out of push order (messages from several workers).
  q.push('low-1', 1_000, -5);
  q.push('mid-2', 1_002, 0);
  q.push('high-3', 1_003, 7);
  q.push('mid-1', 1_001, 0);
  q.push('high-1', 999, 7);
  q.push('low-2', 1_004, -5);
  const order: string[] = [];
  for (let e = q.shift(); e !== undefined; e = q.shift()) order.push(e.waiter);
  assert.deepEqual(order, ['high-1', 'high-3', 'mid-1', 'mid-2', 'low-1', 'low-2']);
});

test('queue: with one priority the order is exactly arrival order (random pushes, removals)', () => {
  let seed = 42;
  const random = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const q = new WaiterQueue<number>(10_000, 60_000, () => undefined);
  const model: { id: number; at: number }[] = [];
  let next = 0;
  for (let step = 0; step < 5_000; step++) {
    const r = random();
    if (r < 0.55) {
      const at = 10_000 + step - Math.floor(random() * 5); // a little out of order
      q.push(next, at);
      model.push({ id: next++, at });
    } else if (r < 0.8 && model.length > 0) {
      const i = Math.floor(random() * model.length);
      assert.ok(q.remove(model[i]!.id));
      model.splice(i, 1);
    } else if (model.length > 0) {
      model.sort((a, b) => a.at - b.at || a.id - b.id);
      // Equal arrival times keep push order: the model's tie-break on id is push order.
      assert.equal(q.shift()?.waiter, model.shift()!.id, `step ${step}`);
    }
  }
  assert.equal(q.size, model.length);
  q.clear(() => undefined);
});

test('queue: random priorities match a sorted model (priority desc, arrival asc)', () => {
  let seed = 7;
  const random = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const q = new WaiterQueue<number>(10_000, 60_000, () => undefined);
  const model: { id: number; at: number; p: number }[] = [];
  const sorted = (): typeof model => [...model].sort((a, b) => b.p - a.p || a.at - b.at || a.id - b.id);
  let next = 0;
  for (let step = 0; step < 5_000; step++) {
    const r = random();
    if (r < 0.5) {
      const p = Math.floor(random() * 7) - 3;
      const at = step;
      q.push(next, at, p);
      model.push({ id: next++, at, p });
    } else if (r < 0.7 && model.length > 0) {
      const i = Math.floor(random() * model.length);
      assert.ok(q.remove(model[i]!.id));
      model.splice(i, 1);
    } else if (r < 0.8 && model.length > 0) {
      // The one a higher arrival would displace: the last in queue order.
      assert.equal(q.last()?.waiter, sorted().at(-1)!.id, `step ${step}`);
    } else if (model.length > 0) {
      const want = sorted()[0]!;
      assert.equal(q.first()?.waiter, want.id);
      assert.equal(q.shift()?.waiter, want.id, `step ${step}`);
      model.splice(model.indexOf(want), 1);
    }
  }
  q.clear(() => undefined);
});

test('queue: a full queue gives the place of the last (lowest priority, most recent) to a higher arrival, else refuses', () => {
  const q = new WaiterQueue<string>(3, 60_000, () => undefined);
  q.push('a0', 1, 0);
  q.push('b0', 2, 0);
  q.push('c5', 3, 5);
  assert.equal(q.full, true);
  assert.equal(q.push('x', 4, 9), false, 'push never displaces by itself');
  assert.equal(q.displaceFor(0), undefined, 'an equal priority displaces nobody');
  assert.equal(q.displaceFor(-1), undefined, 'nor does a lower one');
  assert.equal(q.displaceFor(1)?.waiter, 'b0', 'the most recent arrival among the lowest priority');
  assert.equal(q.push('d1', 5, 1), true);
  assert.equal(q.displaceFor(2)?.waiter, 'a0');
  q.push('e2', 6, 2);
  assert.equal(q.displaceFor(1), undefined, 'nothing below priority 1 is left');
  assert.equal(q.displaceFor(3)?.waiter, 'd1', 'the lowest priority goes first, even if it arrived earlier');
  const order: string[] = [];
  q.clear((e) => order.push(e.waiter));
  assert.deepEqual(order, ['c5', 'e2']);
});

test('queue: each waiter expires at its own deadline, not in queue order; a lower wait cannot be raised', async () => {
  const expired: { w: string; waited: number; allowed: number }[] = [];
  let done!: () => void;
  const all = new Promise<void>((resolve) => (done = resolve));
  const q = new WaiterQueue<string>(10, 300, (w, waited, entry) => {
    expired.push({ w, waited, allowed: entry.deadline - entry.enqueuedAt });
    if (expired.length === 4) done();
  });
  const t0 = performance.timeOrigin + performance.now();
  q.push('first-full', t0, 5); // 300 ms
  q.push('second-60', t0, 5, 60); // 60 ms, behind the first in queue order
  q.push('low-150', t0, 0, 150);
  q.push('asks-more', t0 + 1, 9, 10_000); // capped at the queue's 300 ms
  await within(all, 5_000, 'four expiries');
  assert.deepEqual(
    expired.map((e) => e.w),
    ['second-60', 'low-150', 'first-full', 'asks-more'],
  );
  const [a, b, c, d] = expired as [(typeof expired)[0], (typeof expired)[0], (typeof expired)[0], (typeof expired)[0]];
  assert.deepEqual(expired.map((e) => e.allowed), [60, 150, 300, 300], 'the waits allowed: a longer asked wait is capped at maxWaitMs');
  assert.ok(a.waited >= 59, `60 ms wait took ${a.waited}`);
  assert.ok(b.waited >= 149, `150 ms wait took ${b.waited}`);
  assert.ok(c.waited >= 299 && d.waited >= 299, 'the others waited the full 300 ms');
  assert.equal(q.size, 0);
});

test('queue: one timer for the whole queue, re-armed only for an earlier deadline; none when empty', () => {
  const real = { set: globalThis.setTimeout, clear: globalThis.clearTimeout };
  const live = new Set<unknown>();
  let armed = 0;
  globalThis.setTimeout = ((fn: () => void, ms: number) => {
    const t = real.set(fn, ms);
    live.add(t);
    armed++;
    return t;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((t: NodeJS.Timeout) => {
    live.delete(t);
    real.clear(t);
  }) as typeof clearTimeout;
  try {
    const q = new WaiterQueue<number>(10_000, 60_000, () => undefined);
    const t0 = performance.timeOrigin + performance.now();
    for (let i = 0; i < 1_000; i++) q.push(i, t0 + i, i % 5);
    assert.equal(armed, 1, 'later deadlines never re-arm');
    assert.equal(live.size, 1);
    q.push(5_000, t0 + 1_000, 0, 10); // an earlier deadline than any: re-armed, still one timer
    assert.equal(armed, 2);
    assert.equal(live.size, 1);
    for (let i = 0; i < 500; i++) q.remove(i);
    assert.equal(armed, 2, 'removals never touch the timer');
    q.clear(() => undefined);
    assert.equal(live.size, 0, 'an empty queue holds no timer');
    q.push(1, t0);
    q.remove(1);
    assert.equal(live.size, 0, 'nor does one emptied by a removal');
  } finally {
    globalThis.setTimeout = real.set;
    globalThis.clearTimeout = real.clear;
  }
});

test('queue: expiries come in deadline order after random waits and removals (the deadline heap)', async () => {
  let seed = 99;
  const random = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  let now = 0;
  const expired: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const q = new WaiterQueue<number>(10_000, 5_000, (w) => {
    expired.push(w);
    if (q.size === 0) done();
  }, () => now);
  const deadline = new Map<number, number>();
  for (let i = 0; i < 2_000; i++) {
    const wait = 5 + Math.floor(random() * 4_000);
    q.push(i, 0, Math.floor(random() * 5), wait);
    deadline.set(i, wait);
  }
  for (let i = 0; i < 2_000; i += 1 + Math.floor(random() * 3)) {
    q.remove(i);
    deadline.delete(i);
  }
  now = 1e9; // every deadline has passed when the timer (armed for the earliest, in ms) fires
  await within(finished, 5_000, 'the expiries');
  const want = [...deadline.entries()].sort((a, b) => a[1] - b[1] || a[0] - b[0]).map(([w]) => w);
  assert.equal(expired.length, want.length);
  for (let i = 1; i < expired.length; i++) assert.ok(deadline.get(expired[i - 1]!)! <= deadline.get(expired[i]!)!, `expiry ${i} out of deadline order`);
  assert.deepEqual(new Set(expired), new Set(want));
});
