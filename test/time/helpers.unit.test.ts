// The gateway's two timing helpers, pure (src/time/): the exponential backoff every retry loop
// uses, and the bounded wait for something that should end soon. Mocked timers: no real waits.
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { backoffMs } from '../../src/time/backoff.js';
import { settlesWithin } from '../../src/time/bounded-wait.js';

test('backoff: the base after one failure, doubling per failure, never above the cap', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7].map((n) => backoffMs(250, 5_000, n)),
    [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000],
  );
  // The worker pool's and the ejections' defaults.
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((n) => backoffMs(100, 5_000, n)), [100, 200, 400, 800, 1_600, 3_200, 5_000]);
  assert.deepEqual([1, 2, 4, 5, 6].map((n) => backoffMs(30_000, 300_000, n)), [30_000, 60_000, 240_000, 300_000, 300_000]);
});

test('backoff: a long run of failures stays at the cap; a base of 0 stays 0; no failure yet is the base', () => {
  for (const n of [31, 100, 1_024, 1_025, 5_000, Number.MAX_SAFE_INTEGER]) {
    assert.equal(backoffMs(250, 10_000, n), 10_000, `after ${n} failures`);
    assert.equal(backoffMs(0, 10_000, n), 0, `base 0 after ${n} failures`);
  }
  assert.equal(backoffMs(250, 10_000, 0), 250);
  assert.equal(backoffMs(250, 100, 1), 100, 'a cap below the base wins');
});

test('bounded wait: true once the promise resolves or rejects, before the limit', async () => {
  assert.equal(await settlesWithin(Promise.resolve(1), 60_000), true);
  assert.equal(await settlesWithin(Promise.reject(new Error('gone')), 60_000), true);
});

test('bounded wait: false at the limit when the promise has not settled; a later settling changes nothing', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let resolveLate!: () => void;
  const late = new Promise<void>((resolve) => (resolveLate = resolve));
  let answer: boolean | undefined;
  const waiting = settlesWithin(late, 1_000).then((settled) => (answer = settled));
  t.mock.timers.tick(999);
  await Promise.resolve();
  assert.equal(answer, undefined, 'not decided before the limit');
  t.mock.timers.tick(1);
  await waiting;
  assert.equal(answer, false);
  resolveLate();
  await late;
  assert.equal(answer, false);
});

test('bounded wait: a promise settling first clears the timer', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const cleared = mock.method(globalThis, 'clearTimeout');
  let resolveSoon!: () => void;
  const soon = new Promise<void>((resolve) => (resolveSoon = resolve));
  const waiting = settlesWithin(soon, 1_000);
  resolveSoon();
  assert.equal(await waiting, true);
  assert.equal(cleared.mock.callCount(), 1);
  cleared.mock.restore();
});
