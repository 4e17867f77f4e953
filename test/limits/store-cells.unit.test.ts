// The limit table with a shared store (src/limits/limit-table.ts, src/limits/store/store-cells.ts),
// without Redis: what a request decides from what the control plane wrote in — a lease taken in
// one atomic step, an empty lease that rings the doorbell and waits, the store's "exhausted"
// refusing at once with its Retry-After, places of `concurrent` short (wait) or full (429), and
// the store down: `allow` admits (still counting the place, so the end balances), `refuse` says
// `unavailable`. A wait ends when the control plane wakes the cell set.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LimitControl } from '../../src/limits/limit-control.js';
import { createLimitBuffer } from '../../src/limits/limit-memory.js';
import { LimitTable, type TokenLimit, tokenLimit } from '../../src/limits/limit-table.js';
import { StoreCells } from '../../src/limits/store/store-cells.js';

function token(table: LimitTable, cell: number, limits: TokenLimit['limits'], share = 1): TokenLimit {
  return { ...tokenLimit(table, cell, limits, ''), share };
}

function setUp(refuseWhenDown = false): { table: LimitTable; control: LimitControl; cells: StoreCells } {
  const buffer = createLimitBuffer(2, 1, { refuseWhenDown });
  const cells = new StoreCells(buffer);
  cells.setUp(true);
  return { table: new LimitTable(buffer), control: new LimitControl(buffer), cells };
}

test('requestsPerMinute: a leased request is taken at once; an empty lease rings once per look and waits for the top-up', async () => {
  const { table, control, cells } = setUp();
  const t = token(table, 0, { requestsPerMinute: 10 });
  const bell = cells.bell();
  assert.equal(table.admit(t), 'wait');
  assert.equal(table.admit(t), 'wait');
  assert.equal(cells.bell(), bell + 1, 'the doorbell rings once until the control plane looks');
  assert.equal(cells.takeNeed(0), 2, 'both requests asked');
  const waiting = table.topUp(t, 10_000);
  assert.ok(waiting !== undefined);
  cells.addLease(0, 1);
  cells.wake(0);
  await waiting;
  assert.equal(table.admit(t, false), undefined);
  assert.equal(cells.lease(0), 0);
  // The store said when the next one is granted: refused at once, with that Retry-After.
  cells.setExhausted(0, 30_000);
  assert.equal(table.admit(t), 'requestsPerMinute');
  assert.ok(table.retryAfter >= 29, `retryAfter ${table.retryAfter}`);
  assert.equal(control.refusals(0, 1), 1);
});

test('requestsPerMinute with a share above 1: the top-up is asked for when half of it is left', () => {
  const { table, cells } = setUp();
  const t = token(table, 0, { requestsPerMinute: 2000 }, 10);
  cells.addLease(0, 10);
  for (let i = 0; i < 4; i++) assert.equal(table.admit(t), undefined);
  assert.equal(cells.takeNeed(0), 0, 'six left: not yet');
  assert.equal(table.admit(t), undefined);
  assert.equal(cells.takeNeed(0), 1, 'five left: asked');
});

test('concurrent: short of a place waits, full refuses at once, and a lowered slot count is seen by the next request', () => {
  const { table, cells } = setUp();
  const t = token(table, 0, { concurrent: 3 });
  assert.equal(table.admit(t), 'wait');
  cells.setSlots(0, 1);
  assert.equal(table.admit(t), undefined);
  assert.equal(table.admit(t), 'wait', 'one place held, the store has more');
  cells.setFull(0, true);
  assert.equal(table.admit(t), 'concurrent', 'the store has no place left');
  table.end(t, 0, 0);
  assert.equal(cells.setSlots(0, 0), 0, 'the place went back; nothing in flight');
  cells.setFull(0, false);
  assert.equal(table.admit(t), 'wait');
});

test('a wait that ends without a top-up follows onStoreDown: allow admits (counting the place), refuse is unavailable', () => {
  const allow = setUp(false);
  const t = token(allow.table, 0, { concurrent: 1, requestsPerMinute: 10 });
  assert.equal(allow.table.admit(t, true), undefined, 'waited out: admitted unlimited');
  assert.equal(allow.cells.inflight(0), 1);
  allow.table.end(t, 0, 0);
  assert.equal(allow.cells.inflight(0), 0, 'the end balances');
  const refuse = setUp(true);
  assert.equal(refuse.table.admit(token(refuse.table, 0, { requestsPerMinute: 10 }), true), 'unavailable');
});

test('store down: every limited request decides at once by onStoreDown, no lease needed', () => {
  const allow = setUp(false);
  allow.cells.setUp(false);
  const t = token(allow.table, 1, { requestsPerMinute: 1, concurrent: 1 });
  for (let i = 0; i < 3; i++) assert.equal(allow.table.admit(t), undefined);
  assert.equal(allow.cells.inflight(1), 3);
  const refuse = setUp(true);
  refuse.cells.setUp(false);
  assert.equal(refuse.table.admit(token(refuse.table, 1, { tokensPerMinute: 5 })), 'unavailable');
});

test('tokensPerMinute: the tokens other gateways counted refuse here too', () => {
  const { table, control, cells } = setUp();
  const t = token(table, 0, { tokensPerMinute: 100 });
  assert.equal(table.admit(t), undefined);
  cells.setRemote(0, 100);
  assert.equal(table.admit(t), 'tokensPerMinute');
  assert.equal(control.use(0, t.limits).tokensPerMinute!.used, 100);
});
