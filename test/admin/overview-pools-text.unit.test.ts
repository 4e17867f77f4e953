// The overview page's wording of a pool (src/admin/ui/routing-text.js, shipped as is and run in the
// browser), from /status's `pools`: who holds which unit, who waits.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { UI_DIR } from '../../src/admin/page.js';

const { poolText } = (await import(pathToFileURL(`${UI_DIR}routing-text.js`).href)) as { poolText(pool: unknown): string };

test('a pool: free units and evictions, each unit and its holder, then the waiting services in order', () => {
  const pool = {
    name: 'gpu',
    size: 2,
    used: 2,
    free: 0,
    units: [
      { unit: 0, service: 'chat', replica: 'chat-1', stopping: false },
      { unit: 1, service: 'coder', replica: 'coder-4', stopping: true },
    ],
    waiting: [
      { service: 'embed', units: 1, priority: 5, waitingMs: 2200 },
      { service: 'big', units: 2, priority: 0, waitingMs: 40 },
    ],
    evictions: { chat: 0, coder: 3, embed: 1 },
  };
  assert.equal(
    poolText(pool),
    ['gpu · 0 of 2 units free · 4 evictions', 'unit 0: chat-1 (chat)', 'unit 1: coder-4 (coder), stopping', 'waiting: embed · 1 unit · priority 5 · 2.2 s', 'waiting: big · 2 units · priority 0 · 40 ms'].join('\n'),
  );
  assert.equal(
    poolText({ name: 'one', size: 1, used: 0, free: 1, units: [{ unit: 0, service: null, replica: null, stopping: false }], waiting: [], evictions: { a: 1 } }),
    'one · 1 of 1 unit free · 1 eviction\nunit 0: free',
  );
  assert.equal(poolText(undefined), '');
  assert.equal(poolText({ name: 'x' }), '');
});
