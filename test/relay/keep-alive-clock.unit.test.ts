// The clock of requests kept alive while they wait (src/relay/answer/waiting-comments.ts): a waiting request
// is ticked until it says it no longer waits; a request that has its answer is forgotten at once,
// not at the next tick. Holding finished requests until the tick made every young-generation
// collection copy and promote thousands of them (pauses of 4 to 8 ms at a few thousand requests
// a second), so this checks that nothing of the clock keeps such a request reachable.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { type KeptAlive, keepAliveWhileWaiting, stopKeepingAlive } from '../../src/relay/answer/waiting-comments.js';
import { eventually, sleep } from '../helpers/wait.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Lets the clock tick `n` more times, counted on a request of its own. */
async function ticksPass(n: number): Promise<void> {
  const witness = new Waiter(1_000);
  keepAliveWhileWaiting(witness);
  await eventually(() => witness.ticks >= n, 20_000, `${n} ticks`);
  stopKeepingAlive(witness);
}

class Waiter implements KeptAlive {
  ticks = 0;
  /** Called at each tick, before it answers (to end another request from inside a tick). */
  onTick: (() => void) | undefined = undefined;
  keepAlivePrev: KeptAlive | undefined = undefined;
  keepAliveNext: KeptAlive | undefined = undefined;
  keepAliveWatched = false;
  constructor(private readonly waitsFor: number) {}
  keepAliveTick(): boolean {
    this.ticks += 1;
    this.onTick?.();
    return this.ticks < this.waitsFor;
  }
}

test('a waiting request is ticked until it says it no longer waits, then never again', async () => {
  const w = new Waiter(2);
  keepAliveWhileWaiting(w);
  await eventually(() => w.ticks >= 2, 20_000, 'two ticks');
  await ticksPass(3);
  assert.equal(w.ticks, 2);
});

test('a request that has its answer is not ticked again', async () => {
  const w = new Waiter(1_000);
  keepAliveWhileWaiting(w);
  await eventually(() => w.ticks >= 1, 20_000, 'a tick while it waited');
  const before = w.ticks;
  stopKeepingAlive(w);
  await ticksPass(3);
  assert.equal(w.ticks, before);
});

test('requests answered first, last or in the middle of the watched ones leave the others ticking', async () => {
  const w = Array.from({ length: 6 }, () => new Waiter(1_000));
  for (const x of w) keepAliveWhileWaiting(x);
  keepAliveWhileWaiting(w[3]!); // twice: still once
  for (const i of [0, 2, 5]) stopKeepingAlive(w[i]!); // the oldest, a middle one, the newest
  stopKeepingAlive(w[0]!); // twice: nothing
  await eventually(() => w[1]!.ticks >= 2, 20_000, 'two ticks');
  assert.deepEqual(
    w.map((x) => x.ticks > 0),
    [false, true, false, true, true, false],
  );
  const ticks = w.map((x) => x.ticks);
  assert.ok(ticks[1] === ticks[3] && ticks[3] === ticks[4], `ticked alike: ${ticks.join(', ')}`);
  for (const x of w) stopKeepingAlive(x);
});

test('a request that ends another during a tick: the other is not ticked again', async () => {
  const a = new Waiter(1_000);
  const b = new Waiter(1_000);
  keepAliveWhileWaiting(a);
  keepAliveWhileWaiting(b);
  const c = new Waiter(1_000);
  keepAliveWhileWaiting(c); // ticked first (the newest), then b, then a
  c.onTick = () => stopKeepingAlive(b);
  await eventually(() => c.ticks >= 2, 20_000, 'two ticks');
  assert.equal(a.ticks, c.ticks);
  assert.equal(b.ticks, 0);
  stopKeepingAlive(a);
  stopKeepingAlive(c);
});

test('a request that ends itself during its tick leaves the others ticking', async () => {
  const older = new Waiter(1_000);
  keepAliveWhileWaiting(older);
  const self = new Waiter(1);
  self.onTick = () => stopKeepingAlive(self); // ends, then also answers false
  keepAliveWhileWaiting(self);
  const newer = new Waiter(1_000);
  keepAliveWhileWaiting(newer);
  await eventually(() => older.ticks >= 2, 20_000, 'two ticks after it ended');
  assert.equal(self.ticks, 1);
  assert.equal(newer.ticks, older.ticks);
  stopKeepingAlive(older);
  stopKeepingAlive(newer);
});

test('a request that has its answer is not kept reachable until the next tick', async () => {
  // Each waits for a thousand ticks: only stopKeepingAlive can let it go. (A WeakRef keeps its
  // target until the end of the turn that made it: collect on a later one.)
  const refs: WeakRef<Waiter>[] = [];
  (() => {
    for (let i = 0; i < 100; i++) {
      const w = new Waiter(1_000);
      keepAliveWhileWaiting(w);
      stopKeepingAlive(w);
      refs.push(new WeakRef(w));
    }
  })();
  await sleep(0);
  gc();
  assert.equal(refs.filter((r) => r.deref() !== undefined).length, 0);
});

test('requests still waiting stay reachable (the check above can fail)', async () => {
  const refs: WeakRef<Waiter>[] = [];
  const waiters: Waiter[] = [];
  (() => {
    for (let i = 0; i < 10; i++) {
      const w = new Waiter(1_000);
      keepAliveWhileWaiting(w);
      refs.push(new WeakRef(w));
      waiters.push(w);
    }
  })();
  waiters.length = 0;
  await sleep(0);
  gc();
  assert.equal(refs.filter((r) => r.deref() !== undefined).length, 10);
  for (const r of refs) stopKeepingAlive(r.deref()!);
});
