// The cell sets of the limit table across reloads (src/limits/limit-cells.ts), without a gateway: two
// data plane threads as two LimitTable views, each applying a reload in its own time. A renamed
// token (a new name) is a new token with a cell set of its own; the old one retires: a thread that has not
// applied the reload still admits into it and ends there, and it goes to another token (cleared)
// only once every thread applied the reload and nothing holds it; a dead thread's holds are given
// back and do not keep it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { LimitCells } from '../../src/limits/limit-cells.js';
import { LimitControl } from '../../src/limits/limit-control.js';
import { createLimitBuffer } from '../../src/limits/limit-memory.js';
import { LimitTable, tokenLimit } from '../../src/limits/limit-table.js';
import { sha256Hex } from '../../src/cli/token.js';

const LIMITS = { concurrent: 2, tokensPerMinute: 1000 };

/** A config whose service has limited tokens of these names (and one without limits, so that the list is never empty). */
function config(...names: string[]): ReturnType<typeof parseConfig> {
  const tokens = [...names, 'unlimited'].map((name) => ({ name, sha256: sha256Hex(`slc_${name}_${'t'.repeat(40)}`), ...(name === 'unlimited' ? {} : { limits: LIMITS }) }));
  return parseConfig({ listen: { host: '127.0.0.1', port: 0 }, services: [{ slug: 'svc', tokens, replicas: { urls: ['http://127.0.0.1:9'] } }] });
}

test('a renamed token gets a cell set of its own; the old one is reused only when every thread applied the reload and nothing holds it', () => {
  const buffer = createLimitBuffer(3, 2);
  const control = new LimitControl(buffer);
  const cells = new LimitCells(control);
  const w0 = new LimitTable(buffer, 0);
  const w1 = new LimitTable(buffer, 1);
  const applied = (thread: LimitTable, n: number): void => thread.applied(thread === w0 ? 0 : 1, n);

  const [[a]] = cells.assign(config('a'));
  applied(w0, cells.reload);
  applied(w1, cells.reload);
  const a0 = tokenLimit(w0, a!, LIMITS, '');
  const a1 = tokenLimit(w1, a!, LIMITS, '');
  assert.equal(w0.admit(a0, false, 300), undefined);

  // Renamed to b (the same secret): thread 0 applies the reload, thread 1 not yet.
  const [[b]] = cells.assign(config('b'));
  assert.notEqual(b, a, 'b has a cell set of its own');
  applied(w0, cells.reload);
  const b0 = tokenLimit(w0, b!, LIMITS, '');
  // Thread 1 still admits under a: into a's cell set, not b's.
  assert.equal(w1.admit(a1, false, 200), undefined);
  assert.deepEqual(control.use(a!, LIMITS).concurrent, { limit: 2, used: 2 });
  assert.deepEqual(control.use(b!, LIMITS).concurrent, { limit: 2, used: 0 });
  // b has its own 2 places.
  assert.equal(w0.admit(b0), undefined);
  assert.equal(w0.admit(b0), undefined);
  assert.equal(w0.admit(b0), 'concurrent');
  w0.end(b0, 0, 0);
  w0.end(b0, 0, 0);

  // a's requests end where they began; a's cell set is not reused while thread 1 has not applied the reload.
  w0.end(a0, 300, 10);
  w1.end(a1, 200, 10);
  assert.ok(control.idle(a!));
  const [[, c]] = cells.assign(config('b', 'c'));
  assert.notEqual(c, a, 'a thread still admits under a: its cell set is not free yet');
  applied(w0, cells.reload);
  applied(w1, cells.reload);
  const [[, , d]] = cells.assign(config('b', 'c', 'd'));
  assert.equal(d, a, 'every thread applied the reload and nothing holds it: reused');
  assert.deepEqual(control.use(d!, LIMITS), { concurrent: { limit: 2, used: 0 }, tokensPerMinute: { limit: 1000, used: 0, reserved: 0 } }, 'cleared for d');
  // A request of a that ends now (too late: it was not counted any more) leaves d alone.
  w1.end(a1, 200, 10);
  assert.deepEqual(control.use(d!, LIMITS).concurrent, { limit: 2, used: 0 });
});

test('a removed token whose thread dies with its requests: the holds are given back and the cell set can go to another token', () => {
  const buffer = createLimitBuffer(2, 2);
  const control = new LimitControl(buffer);
  const cells = new LimitCells(control);
  const w1 = new LimitTable(buffer, 1);
  const [[a]] = cells.assign(config('a'));
  control.applied(0, cells.reload);
  w1.applied(1, cells.reload);
  const a1 = tokenLimit(w1, a!, LIMITS, '');
  assert.equal(w1.admit(a1, false, 500), undefined);
  cells.assign(config());
  control.applied(0, cells.reload);
  // Thread 1 dies before it applies the reload; its replacement starts with the tokens as they are.
  assert.equal(control.reclaim(1), 1);
  w1.applied(1, cells.reload);
  assert.ok(control.idle(a!));
  // Two cell sets in all: both new tokens get one, so a's came back.
  const [[x, e]] = cells.assign(config('x', 'e'));
  assert.deepEqual([x, e].sort(), [0, 1]);
  assert.throws(() => cells.assign(config('x', 'e', 'f')), /room for 2 limited tokens/);
});
