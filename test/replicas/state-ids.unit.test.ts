// The shared table of stored-state ids (state-ids.ts) and the take of the replica that holds one
// (slots.ts `takeSlot`), on their own: the bound, the newest ids kept, and no replica but the one
// that answered (not a replica that took its slot since, not one out of rotation or full).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SlotControl } from '../../src/replicas/slot-control.js';
import { BUSY, EMPTY, READY, SlotTable } from '../../src/replicas/slots.js';
import { StateIds } from '../../src/replicas/state-ids.js';

function table(n: number, concurrency = 0): { slots: SlotTable; control: SlotControl; known: Int32Array } {
  const control = SlotControl.create(n, 1, concurrency);
  const slots = new SlotTable(control.init);
  const known = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    assert.equal(control.claim(), i);
    control.setState(i, READY);
    known[i] = control.gen(i);
  }
  return { slots, control, known };
}

test('the table holds at most its capacity, keeps the newest ids, and every thread reads what one wrote', () => {
  const buffer = StateIds.create();
  const writer = new StateIds(buffer);
  const reader = new StateIds(buffer); // another thread's view of the same memory
  const n = 3 * StateIds.capacity;
  for (let i = 0; i < n; i++) writer.learn(`resp_${i}`, i % 7, i);
  let found = 0;
  for (let i = 0; i < n; i++) {
    const slot = reader.find(`resp_${i}`);
    if (slot < 0) continue;
    found++;
    assert.equal(slot, i % 7, `resp_${i}'s slot`);
    assert.equal(reader.gen, i, `resp_${i}'s generation`);
  }
  assert.ok(found <= StateIds.capacity, `${found} ids kept, at most ${StateIds.capacity}`);
  // The newest id of each set is always kept: the last ones written are found.
  for (let i = n - 16; i < n; i++) assert.equal(reader.find(`resp_${i}`), i % 7, `resp_${i}, among the newest`);
  assert.equal(reader.find('resp_never'), -1);
  // Learned again (another replica answered for it): the entry is replaced, not duplicated.
  writer.learn(`resp_${n - 1}`, 3, 99);
  assert.equal(reader.find(`resp_${n - 1}`), 3);
  assert.equal(reader.gen, 99);
});

test('the replica holding an id is taken only while it is the same replica, in rotation, with room', () => {
  const { slots, control, known } = table(3, 2);
  slots.ids.learn('resp_x', 1, control.gen(1));
  const slot = slots.ids.find('resp_x');
  assert.equal(slot, 1);
  assert.equal(slots.takeSlot(0, known, slot, slots.ids.gen), 1);
  assert.equal(slots.takeSlot(0, known, slot, slots.ids.gen), 1);
  assert.equal(slots.takeSlot(0, known, slot, slots.ids.gen), -1, 'at its concurrency: no room');
  slots.release(0, 1);
  slots.release(0, 1);
  control.setState(1, BUSY);
  assert.equal(slots.takeSlot(0, known, slot, slots.ids.gen), -1, 'draining or starting: not in rotation');
  // Gone, and its slot given to a new replica: the id names the old one.
  control.setState(1, EMPTY);
  assert.equal(control.claim(), 1);
  control.setState(1, READY);
  assert.equal(slots.takeSlot(0, known, slots.ids.find('resp_x'), slots.ids.gen), -1, 'this thread does not know the new replica yet');
  known[1] = control.gen(1);
  assert.equal(slots.takeSlot(0, known, slots.ids.find('resp_x'), slots.ids.gen), -1, 'another generation: another replica');
  assert.equal(slots.takeSlot(0, known, 7, 0), -1, 'a slot out of the table');
});
