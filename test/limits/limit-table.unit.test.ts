// The limit table's cells (src/limits/limit-table.ts, limit-control.ts) without a gateway: GCRA's burst and when the
// next request is due, concurrent places held per thread and given back when a thread dies, a cell
// set given to another token, the token window with its reservations taken at admission (at most
// the limit), and counts that saturate instead of wrapping. limit-table-fuzz.unit.test.ts drives
// random runs of all of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LimitControl } from '../../src/limits/limit-control.js';
import { createLimitBuffer } from '../../src/limits/limit-memory.js';
import { LimitTable, type TokenLimit, tokenLimit } from '../../src/limits/limit-table.js';
import { BUCKET_MAX } from '../../src/limits/token-window.js';

/** A data plane thread's view of a new table (thread 0) and the control plane's view of the same memory. */
function tables(cellSets: number, threads: number): { table: LimitTable; control: LimitControl } {
  const buffer = createLimitBuffer(cellSets, threads);
  return { table: new LimitTable(buffer), control: new LimitControl(buffer) };
}

function token(table: LimitTable | LimitControl, cell: number, limits: TokenLimit['limits']): TokenLimit {
  return tokenLimit(table, cell, limits, '');
}

test('requestsPerMinute: a burst of the limit, then refused until 60/limit s after the first', () => {
  const { table, control } = tables(4, 1);
  const t = token(table, 1, { requestsPerMinute: 5 });
  for (let i = 0; i < 5; i++) assert.equal(table.admit(t), undefined, `request ${i + 1}`);
  assert.equal(table.leftRequests, 0);
  assert.equal(table.admit(t), 'requestsPerMinute');
  assert.ok(table.retryAfter >= 1 && table.retryAfter <= 12, `retryAfter ${table.retryAfter}`);
  assert.equal(control.refusals(1, 1), 1);
  assert.deepEqual(control.use(1, t.limits), { requestsPerMinute: { limit: 5, used: 5 } });
  // Another cell set is another token.
  assert.equal(table.admit(token(table, 2, { requestsPerMinute: 5 })), undefined);
});

test('concurrent: places held per thread; a thread that dies gives its places and reservations back', () => {
  const buffer = createLimitBuffer(2, 2);
  const main = new LimitControl(buffer);
  const w0 = new LimitTable(buffer, 0);
  const w1 = new LimitTable(buffer, 1);
  const t = token(main, 0, { concurrent: 2, tokensPerMinute: 1000 });
  assert.equal(w0.admit(t), undefined);
  assert.equal(w1.admit(t, false, 300), undefined);
  assert.equal(w0.admit(t, false, 100), 'concurrent');
  assert.equal(w0.retryAfter, 1);
  assert.deepEqual(main.use(0, t.limits), { concurrent: { limit: 2, used: 2 }, tokensPerMinute: { limit: 1000, used: 300, reserved: 300 } });
  assert.equal(main.reclaim(1), 1);
  assert.deepEqual(main.use(0, t.limits), { concurrent: { limit: 2, used: 1 }, tokensPerMinute: { limit: 1000, used: 0, reserved: 0 } });
  w0.end(t, 0, 0);
  assert.equal(main.use(0, t.limits).concurrent!.used, 0);
});

test('a cell set given to another token: requests of the old one end without touching it', () => {
  const { table, control } = tables(1, 1);
  const old = token(table, 0, { concurrent: 1 });
  assert.equal(table.admit(old), undefined);
  control.clear(0);
  const next = token(table, 0, { concurrent: 1 });
  assert.equal(table.admit(next), undefined);
  table.end(old, 0, 0);
  assert.equal(table.admit(next), 'concurrent', "the old token's end left the new one's place taken");
});

test('tokensPerMinute: settled tokens and reservations count; a request is admitted with its reservation while below the limit', () => {
  const { table, control } = tables(1, 1);
  const t = token(table, 0, { tokensPerMinute: 100 });
  assert.equal(table.admit(t, false, 70), undefined);
  assert.equal(table.leftTokens, 30, 'what is left after its own reservation');
  assert.equal(table.admit(t, false, 30), undefined, '70 < 100');
  assert.equal(table.admit(t), 'tokensPerMinute', 'reservations reach the limit');
  assert.equal(table.retryAfter, 1, 'reservations alone: when they end is unknown');
  table.end(t, 70, 90);
  table.end(t, 30, 0);
  assert.deepEqual(control.use(0, t.limits), { tokensPerMinute: { limit: 100, used: 90, reserved: 0 } });
  assert.equal(table.admit(t), undefined, '90 < 100');
  table.end(t, 0, 20);
  assert.equal(table.admit(t), 'tokensPerMinute');
  assert.ok(table.retryAfter >= 59 && table.retryAfter <= 60, `the settled tokens leave the window in a minute: ${table.retryAfter}`);
  assert.ok(control.idle(0), 'every request ended: nothing held');
});

test('tokensPerMinute: a refusal by another limit gives the reservation back', () => {
  const { table, control } = tables(1, 1);
  const t = token(table, 0, { tokensPerMinute: 100, concurrent: 1, requestsPerMinute: 2 });
  assert.equal(table.admit(t, false, 10), undefined);
  assert.equal(table.admit(t, false, 10), 'concurrent');
  table.end(t, 10, 10);
  assert.equal(table.admit(t, false, 10), undefined);
  table.end(t, 10, 10);
  assert.equal(table.admit(t, false, 10), 'requestsPerMinute');
  assert.deepEqual(control.use(0, t.limits).tokensPerMinute, { limit: 100, used: 20, reserved: 0 });
  assert.deepEqual(control.use(0, t.limits).concurrent, { limit: 1, used: 0 });
});

test('no count wraps: reservations of the largest limit, usage far past it', () => {
  const { table, control } = tables(1, 1);
  const t = token(table, 0, { tokensPerMinute: 1_000_000_000 });
  // The largest reservation is the limit: one request in an empty window, then nothing more.
  assert.equal(table.admit(t, false, 1_000_000_000), undefined);
  assert.equal(table.admit(t, false, 1_000_000_000), 'tokensPerMinute');
  table.end(t, 1_000_000_000, 5_000_000_000);
  const use = control.use(0, t.limits).tokensPerMinute!;
  assert.equal(use.reserved, 0);
  assert.equal(use.used, BUCKET_MAX, 'the bucket saturates');
  assert.equal(table.admit(t), 'tokensPerMinute');
});
