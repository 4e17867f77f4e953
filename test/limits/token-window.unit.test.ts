// The tokensPerMinute window's buckets (src/limits/token-window.ts): a thread's sum of the past
// seconds (PastWindows) reads what every bucket read would, as settlements come in the current
// second, when the second turns, during a second's first milliseconds (a lagging thread may still
// settle into the second just past) and when the cell set changes hands.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BUCKET_MAX, PastWindows, settle, WINDOW_S, windowRead, windowSum } from '../../src/limits/token-window.js';

const CELLS = 2;
const at = (cell: number): number => cell * 2 * WINDOW_S;

/** What a read of all 60 buckets says: the sum, and when the oldest settled bucket leaves. */
function full(a: Int32Array, cell: number, second: number): { sum: number; oldestLeavesIn: number } {
  let oldest = second + 1;
  for (let i = 0; i < WINDOW_S; i++) {
    const s = a[at(cell) + 2 * i]!;
    if (s > second - WINDOW_S && s <= second && s < oldest && a[at(cell) + 2 * i + 1]! > 0) oldest = s;
  }
  return { sum: windowSum(a, at(cell), second), oldestLeavesIn: oldest > second ? 0 : oldest + WINDOW_S - second };
}

test('the past seconds kept, the current bucket read live: the same as every bucket read, over two minutes of settlements', () => {
  const a = new Int32Array(CELLS * 2 * WINDOW_S);
  const past = new PastWindows(CELLS);
  let seed = 20261126;
  const random = (n: number): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
  for (let second = 1000; second < 1120; second++) {
    for (let step = 0; step < 20; step++) {
      const cell = random(CELLS);
      const ms = step < 3 ? step * 2 : step * 50;
      if (random(3) === 0) settle(a, at(cell), second, 1 + random(50));
      // A lagging thread, in the first milliseconds of a second, settles into the one just past.
      if (ms < 5 && random(2) === 0) settle(a, at(cell), second - 1, 7);
      past.read(a, at(cell), cell, 0, second, ms);
      assert.deepEqual({ ...windowRead }, full(a, cell, second), `second ${second}, ${ms} ms, cell ${cell}`);
    }
  }
});

test('a cell set that changes hands (its generation) is summed again', () => {
  const a = new Int32Array(CELLS * 2 * WINDOW_S);
  const past = new PastWindows(CELLS);
  settle(a, at(0), 500, 40);
  past.read(a, at(0), 0, 0, 501, 100);
  assert.equal(windowRead.sum, 40);
  // The control plane clears the cell set for another token (limit-control.ts `clear`) and bumps its generation.
  a.fill(0, at(0), at(0) + 2 * WINDOW_S);
  past.read(a, at(0), 0, 1, 501, 200);
  assert.deepEqual({ ...windowRead }, { sum: 0, oldestLeavesIn: 0 });
});

test('tokens only in the current second leave the window in 60 s', () => {
  const a = new Int32Array(CELLS * 2 * WINDOW_S);
  const past = new PastWindows(CELLS);
  settle(a, at(1), 700, 5);
  past.read(a, at(1), 1, 0, 700, 500);
  assert.deepEqual({ ...windowRead }, { sum: 5, oldestLeavesIn: 60 });
  past.read(a, at(1), 1, 0, 759, 500);
  assert.deepEqual({ ...windowRead }, { sum: 5, oldestLeavesIn: 1 });
  past.read(a, at(1), 1, 0, 760, 500);
  assert.deepEqual({ ...windowRead }, { sum: 0, oldestLeavesIn: 0 });
});

test('a bucket saturates at BUCKET_MAX instead of wrapping, however much is settled into it', () => {
  const a = new Int32Array(2 * WINDOW_S);
  settle(a, 0, 500, 2_000_000_000);
  settle(a, 0, 500, 2_000_000_000);
  settle(a, 0, 500, Number.MAX_SAFE_INTEGER);
  assert.equal(windowSum(a, 0, 500), BUCKET_MAX);
  // A new second in the same bucket starts from what it settles, within the bound too.
  settle(a, 0, 560, 3_000_000_000);
  assert.equal(windowSum(a, 0, 560), BUCKET_MAX);
});
