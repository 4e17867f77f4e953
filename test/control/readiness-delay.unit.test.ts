// The readiness poll's pace (src/control/service/health.ts `readinessDelay`): fast for a start's
// first 2 s, slower after, and fast again around the time the service's recent starts have taken,
// so that a request waiting for a start it can expect (a cold start, a pool's swap) waits for the
// probe as little as at the start.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readinessDelay } from '../../src/control/service/health.js';
import { READY_NEAR_MS } from '../../src/tunables.js';

const POLL = 10;

test('no start measured yet: the poll every 10 ms for 2 s, then every 25 ms, every 100 ms past 30 s', () => {
  assert.deepEqual([0, 1_999, 2_000, 29_999, 30_000, 300_000].map((t) => readinessDelay(t, -1, POLL)), [10, 10, 25, 25, 100, 100]);
});

test('around the expected start: back to the fastest pace, from READY_NEAR_MS before it to twice that after', () => {
  const expected = 5_000;
  const at = (t: number): number => readinessDelay(t, expected, POLL);
  assert.equal(at(expected - READY_NEAR_MS - 1), 25);
  assert.equal(at(expected - READY_NEAR_MS), POLL);
  assert.equal(at(expected), POLL);
  assert.equal(at(expected + 2 * READY_NEAR_MS), POLL);
  assert.equal(at(expected + 2 * READY_NEAR_MS + 1), 25);
  // A long start (a model of minutes): slow poll far from it, fast near it.
  assert.equal(readinessDelay(60_000, 120_000, POLL), 100);
  assert.equal(readinessDelay(119_500, 120_000, POLL), POLL);
});

test('a configured poll slower than the floor is kept', () => {
  assert.equal(readinessDelay(5_000, 5_000, 50), 50);
  assert.equal(readinessDelay(5_000, -1, 50), 50);
});
