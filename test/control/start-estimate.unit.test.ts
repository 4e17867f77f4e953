// The expected start: the median of the last eight measured starts, published for every thread
// only once one was measured, and only while the service is cold.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StartEstimate } from '../../src/control/service/start-estimate.js';
import { ExpectedStart } from '../../src/replicas/expected-start.js';

test('the median of the last eight starts: one far slower start does not move it, a lasting change does', () => {
  const shared = ExpectedStart.create();
  const starts = new StartEstimate(shared);
  assert.equal(starts.estimateMs, -1);
  starts.measured(1000);
  assert.equal(starts.estimateMs, 1000);
  starts.measured(3000);
  assert.equal(starts.estimateMs, 2000, 'two: the mean of the middle two');
  for (const ms of [1000, 1100, 900, 60_000]) starts.measured(ms);
  assert.equal(starts.estimateMs, 1050, 'an outlier (60 s) barely moves it');
  for (let i = 0; i < 5; i++) starts.measured(5000);
  // The window now holds 1100, 900, 60000 and five of 5000: the old starts have left it.
  assert.equal(starts.estimateMs, 5000);
});

test('published only after a measured start, and only while cold: in progress, nothing starting, or warm', () => {
  const shared = ExpectedStart.create();
  const starts = new StartEstimate(shared);
  starts.publish(true, performance.now(), false);
  assert.equal(shared.leftMs(), -1, 'nothing before a start was measured');
  assert.equal(shared.estimateMs, -1);
  starts.measured(4000);
  starts.publish(true, -1, true);
  assert.equal(shared.leftMs(), 4000, 'cold, nothing starting: a start now takes the estimate');
  starts.publish(true, performance.now(), false);
  const left = shared.leftMs();
  assert.ok(left > 0 && left <= 4000, `a start asked for just now: ${left} ms left`);
  const quick = new StartEstimate(shared);
  quick.measured(1);
  quick.publish(true, 0, false);
  assert.equal(shared.leftMs(), 0, 'overdue (asked for when the process began, expected a millisecond later): 0 left');
  starts.publish(true, -1, false);
  assert.equal(shared.leftMs(), -1, 'cold with replicas out of rotation and nothing starting: unknown');
  starts.publish(false, -1, false);
  assert.equal(shared.leftMs(), -1, 'warm: nothing');
});
