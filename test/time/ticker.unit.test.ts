// The one clock of the upstream deadlines (src/time/ticker.ts): a deadline is called once, at
// the tick it names, and not at the ticks before it (visiting every live connection at every tick
// cost more than relaying tokens); a deadline moved earlier is called at the earlier tick only; a
// cancelled one never, and nothing of the clock keeps it reachable (a closed connection must not
// wait in memory for a tick minutes away).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { cancel, type Deadline, schedule, type Ticking, tickNow, unwatch, watch } from '../../src/time/ticker.js';
import { eventually } from '../helpers/wait.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

class Waiter implements Deadline {
  /** The ticks at which it was called. */
  readonly calls: number[] = [];
  dueTick = -1;
  duePrev: Deadline | undefined = undefined;
  dueNext: Deadline | undefined = undefined;
  onDeadline(): void {
    this.calls.push(tickNow());
  }
}

/** Lets the clock run until tick `tick` has passed, counted by a watcher of its own. */
async function untilTick(tick: number): Promise<void> {
  const witness: Ticking = { onTick() {} };
  watch(witness);
  try {
    await eventually(() => tickNow() >= tick, 20_000, `tick ${tick}`);
  } finally {
    unwatch(witness);
  }
}

test('a deadline is called once, at the tick it names, and not at the ticks before it', async () => {
  const a = new Waiter();
  const b = new Waiter();
  const at = tickNow() + 3;
  schedule(a, at);
  schedule(b, at + 2);
  await untilTick(at + 4);
  assert.deepEqual(a.calls, [at]);
  assert.deepEqual(b.calls, [at + 2]);
  assert.equal(a.dueTick, -1);
});

test('a deadline moved earlier is called at the earlier tick only; moved later, it stays where it was', async () => {
  const earlier = new Waiter();
  const start = tickNow();
  schedule(earlier, start + 10);
  schedule(earlier, start + 2);
  const later = new Waiter();
  schedule(later, start + 3);
  schedule(later, start + 9); // already due sooner: it is called then and may schedule itself again
  await untilTick(start + 11);
  assert.deepEqual(earlier.calls, [start + 2]);
  assert.deepEqual(later.calls, [start + 3]);
});

test('a tick already passed is the next one; several waiters of one tick are all called, also when one cancels another', async () => {
  const first = new Waiter();
  const second = new Waiter();
  const third = new Waiter();
  const at = tickNow() + 2;
  // Called in either order: whichever runs first cancels the other, which then is called harmlessly or not at all.
  first.onDeadline = function (this: Waiter) {
    this.calls.push(tickNow());
    cancel(second);
  };
  schedule(first, at);
  schedule(second, at);
  schedule(third, at);
  const past = new Waiter();
  schedule(past, tickNow() - 5);
  await untilTick(at + 1);
  assert.deepEqual(first.calls, [at]);
  assert.deepEqual(third.calls, [at]);
  assert.ok(second.calls.length <= 1);
  assert.equal(past.calls.length, 1);
});

test('a cancelled deadline is never called, and the clock holds nothing of it', async () => {
  let ref: WeakRef<Waiter> | undefined;
  const at = tickNow() + 2;
  (() => {
    const w = new Waiter();
    schedule(w, at + 1_000);
    cancel(w);
    ref = new WeakRef(w);
  })();
  const cancelled = new Waiter();
  schedule(cancelled, at);
  cancel(cancelled);
  await untilTick(at + 1);
  assert.deepEqual(cancelled.calls, []);
  gc();
  assert.equal(ref!.deref(), undefined, 'a cancelled waiter is unreachable from the clock');
});
