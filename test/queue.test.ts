// The waiter queue on its own: FIFO order, bound, O(1) removal, and deadlines served by one timer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WaiterQueue } from '../src/replicas/queue.js';
import { TestWaiter, within } from './fixtures/replica-harness.js';

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
  q.push(ws[0]!);
  q.push(ws[1]!);
  // The later ones arrive a little later: their deadlines are later too.
  await new Promise((resolve) => setTimeout(resolve, 40));
  q.push(ws[2]!);
  q.push(ws[3]!);
  q.remove(ws[1]!);
  await within(5_000, 'three waiters expiring', allExpired);
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
  const waited = await within(5_000, 'the re-queued waiter expiring', secondExpired);
  assert.ok(waited >= 79, `waited ${waited} ms`);
});

test('queue: the same waiter cannot be queued twice', () => {
  const q = new WaiterQueue(10, 60_000, () => undefined);
  const w = new TestWaiter();
  q.push(w);
  assert.throws(() => q.push(w), /already queued/);
  q.clear(() => undefined);
});
