// The prefix index on its own (no sockets): the bound on the blocks each replica keeps, the least
// recently sent forgotten first with a prompt's leading blocks outliving its tail, the counts, and
// a slot that gets a new replica starting with an empty index.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SlotControl } from '../../src/replicas/slot-control.js';
import { READY, SlotTable } from '../../src/replicas/slots.js';
import { EMPTY } from '../../src/replicas/slot-layout.js';
import { hashKey } from '../../src/replicas/affinity-ring.js';

function table(n: number, indexSize: number): { slots: SlotTable; control: SlotControl; known: Int32Array } {
  const control = SlotControl.create(n, 1, 0, false, indexSize);
  const slots = new SlotTable(control.init);
  const known = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    assert.equal(control.claim(), i);
    control.setState(i, READY);
    known[i] = control.gen(i);
  }
  return { slots, control, known };
}

/** A prompt's chain: `blocks` hashes, distinct per `seed` (never 0). */
function chain(seed: number, blocks: number): Int32Array {
  return Int32Array.from({ length: blocks }, (_, k) => hashKey(`${seed}:${k}`) || 1);
}

test('each replica keeps at most indexSize blocks, however many prompts it is sent', () => {
  const { slots } = table(2, 256);
  const index = slots.prefix!;
  assert.ok(index.capacity <= 256);
  for (let p = 0; p < 500; p++) index.record(0, chain(p, 8));
  assert.equal(index.size(0), index.capacity, 'full, and no more');
  assert.equal(index.size(1), 0, 'another replica keeps its own');
  // The latest prompts are found whole; the first ones were forgotten.
  assert.equal(index.run(0, chain(499, 8)), 8);
  assert.equal(index.run(0, chain(0, 8)), 0);
});

test('a prompt sent again is matched by its leading run; its leading blocks outlive its tail', () => {
  const { slots } = table(1, 1024);
  const index = slots.prefix!;
  const shared = chain(1, 16);
  assert.equal(index.record(0, shared), 0, 'nothing cached the first time');
  const longer = Int32Array.from([...shared, ...chain(2, 4)]);
  assert.equal(index.run(0, longer), 16);
  assert.equal(index.record(0, longer), 16);
  assert.deepEqual(index.slotCounts(0), { requests: 2, blocks: 36, matched: 16 });
  assert.deepEqual(index.totals(), { requests: 2, blocks: 36, matched: 16 });
  // Fill the index with other prompts until the shared one starts to be forgotten: its first block goes last.
  let p = 100;
  while (index.run(0, shared) === 16) index.record(0, chain(p++, 4));
  const run = index.run(0, shared);
  assert.ok(run >= 0 && run < 16);
});

test('the pick prefers the longest leading run; a slot that gets a new replica starts with an empty index', () => {
  const { slots, control, known } = table(3, 1024);
  const index = slots.prefix!;
  const prompt = chain(5, 10);
  index.record(2, prompt);
  index.record(1, prompt.subarray(0, 4));
  const s = slots.takePrefix(0, known, prompt, 1.25, false);
  assert.equal(s, 2, 'the longest run');
  slots.release(0, s);
  // The replica in slot 2 leaves; its slot is reused by a new one.
  control.setState(2, EMPTY);
  assert.equal(control.claim(), 2);
  control.setState(2, READY);
  known[2] = control.gen(2);
  assert.equal(index.run(2, prompt), 0, 'the new replica was sent nothing');
  assert.equal(index.size(2), 0);
  assert.deepEqual(index.slotCounts(2), { requests: 0, blocks: 0, matched: 0 });
  assert.equal(slots.takePrefix(0, known, prompt, 1.25, false), 1, 'the next longest run');
});
