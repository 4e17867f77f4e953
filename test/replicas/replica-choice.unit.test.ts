// The choice of a replica in the shared slot table, on its own (no sockets): equal replicas in
// turn, load scores, cache-full replicas last, and the affinity ring with bounded loads.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AffinityRing, hashKey } from '../../src/replicas/affinity-ring.js';
import { POINTS_PER_REPLICA } from '../../src/tunables.js';
import { SlotControl } from '../../src/replicas/slot-control.js';
import { BUSY, EJECTED, READY, SlotTable } from '../../src/replicas/slots.js';

/** A table of `n` ready replicas known to thread 0 (its data plane's view and the control plane's), with `known` to pass to take. */
function table(n: number, options: { concurrency?: number; scored?: boolean } = {}): { slots: SlotTable; control: SlotControl; known: Int32Array } {
  const control = SlotControl.create(n, 1, options.concurrency ?? 0, options.scored ?? false);
  const slots = new SlotTable(control.init);
  const known = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    assert.equal(control.claim(), i);
    control.setState(i, READY);
    known[i] = control.gen(i);
  }
  return { slots, control, known };
}

function ringOf(origins: string[]): AffinityRing {
  const ring = new AffinityRing();
  origins.forEach((o, slot) => ring.set(slot, o));
  return ring;
}

test('equal replicas are taken in turn; a busier one is skipped until the others catch up', () => {
  const { slots, known } = table(3);
  const picks = Array.from({ length: 6 }, () => {
    const s = slots.take(0, known, -1, false);
    slots.release(0, s);
    return s;
  });
  assert.deepEqual(picks, [0, 1, 2, 0, 1, 2], 'ties rotate (before: always slot 0)');
  const held = slots.take(0, known, -1, false); // slot 0 now has one in flight
  assert.equal(held, 0);
  const next = [slots.take(0, known, -1, false), slots.take(0, known, -1, false)];
  assert.deepEqual(next.sort(), [1, 2], 'fewest in flight first');
});

test('with loads read: the lowest score wins; what was sent since the reading and is still in flight counts on top', () => {
  const { slots, control, known } = table(3, { scored: true });
  // No reading anywhere: in flight decides, ties in turn.
  assert.equal(slots.take(0, known, -1, false), 0);
  slots.release(0, 0);
  control.publishReading(0, 5, false, control.taken(0));
  control.publishReading(1, 2, false, control.taken(1));
  control.publishReading(2, 3, false, control.taken(2));
  assert.equal(slots.take(0, known, -1, false), 1, 'waiting 2 beats 3 and 5');
  // Slot 1: 2 waiting + 1 sent and in flight = 3, like slot 2's 3: fewer in flight decides.
  assert.equal(slots.take(0, known, -1, false), 2);
  // Slot 1: 3, slot 2: 4.
  assert.equal(slots.take(0, known, -1, false), 1);
  // Slot 1: 4 (2 in flight), slot 2: 4 (1 in flight), slot 0: 5.
  assert.equal(slots.take(0, known, -1, false), 2);
  assert.equal(slots.take(0, known, -1, false), 1);
  // Sent since the reading but no longer in flight does not count: slot 1 back to 2, slot 2 to 3.
  for (const s of [1, 1, 1, 2, 2]) slots.release(0, s);
  assert.equal(slots.take(0, known, -1, false), 1);
  slots.release(0, 1);
  // A new reading resets what counts as sent.
  control.publishReading(1, 9, false, control.taken(1));
  assert.equal(slots.take(0, known, -1, false), 2);
  slots.release(0, 2);
  // A cleared reading weighs by in flight (0 here), below every score.
  control.clearReading(0);
  assert.equal(slots.take(0, known, -1, false), 0);
  slots.release(0, 0);
});

test('a cache-full replica is chosen only when every other is full too', () => {
  const { slots, control, known } = table(2, { scored: true });
  control.publishReading(0, 0, true, control.taken(0));
  control.publishReading(1, 50, false, control.taken(1));
  for (let i = 0; i < 3; i++) {
    const s = slots.take(0, known, -1, false);
    assert.equal(s, 1, 'the full one is avoided, even with an empty queue');
    slots.release(0, s);
  }
  control.publishReading(1, 50, true, control.taken(1));
  assert.equal(slots.take(0, known, -1, false), 0, 'all full: the score decides again');
});

test('concurrency holds whatever the scores', () => {
  const { slots, control, known } = table(2, { scored: true, concurrency: 1 });
  control.publishReading(0, 0, false, control.taken(0));
  control.publishReading(1, 10, false, control.taken(1));
  assert.equal(slots.take(0, known, -1, false), 0);
  assert.equal(slots.take(0, known, -1, false), 1, 'slot 0 is at its concurrency');
  assert.equal(slots.take(0, known, -1, false), -1);
});

test('the ring: the same on every gateway whatever the order replicas were added; even shares', () => {
  const origins = ['http://10.0.0.1:8000', 'http://10.0.0.2:8000', 'http://10.0.0.3:8000', 'http://10.0.0.4:8000'];
  const a = ringOf(origins);
  const b = new AffinityRing();
  [3, 1, 0, 2].forEach((slot) => b.set(slot + 10, origins[slot]!));
  assert.equal(a.points.length, 4 * POINTS_PER_REPLICA);
  assert.deepEqual([...a.points], [...b.points]);
  assert.deepEqual([...a.owners].map((s) => origins[s]), [...b.owners].map((s) => origins[s - 10]));
  const share = new Map<number, number>();
  for (let i = 0; i < 20_000; i++) {
    const owner = a.owners[a.first(hashKey(`session-${i}`))]!;
    share.set(owner, (share.get(owner) ?? 0) + 1);
  }
  for (const [slot, n] of share) assert.ok(n > 20_000 * 0.25 * 0.75 && n < 20_000 * 0.25 * 1.25, `replica ${slot}: ${n} of 20000 sessions`);
});

test('the ring: a replica leaving moves only its own sessions; one joining takes sessions only for itself', () => {
  const origins = ['http://a:1', 'http://b:1', 'http://c:1', 'http://d:1'];
  const ring = ringOf(origins);
  const owner = (r: AffinityRing, key: string): number => r.owners[r.first(hashKey(key))]!;
  const keys = Array.from({ length: 5_000 }, (_, i) => `s${i}`);
  const before = keys.map((k) => owner(ring, k));
  ring.delete(2);
  const after = keys.map((k) => owner(ring, k));
  keys.forEach((_, i) => {
    if (before[i] !== 2) assert.equal(after[i], before[i], `session ${i} moved although its replica stayed`);
    else assert.notEqual(after[i], 2);
  });
  ring.set(4, 'http://e:1');
  const joined = keys.map((k) => owner(ring, k));
  keys.forEach((_, i) => {
    if (joined[i] !== 4) assert.equal(joined[i], after[i], `session ${i} moved to another old replica`);
  });
  assert.ok(joined.filter((s) => s === 4).length > 500, 'the new replica takes its share');
});

test('takeNear: a session stays on its replica within the bound, then spills to the next on the ring', () => {
  const { slots, known } = table(3);
  const ring = ringOf(['http://a:1', 'http://b:1', 'http://c:1']);
  const hash = hashKey('conversation-1');
  const home = ring.owners[ring.first(hash)]!;
  for (let i = 0; i < 5; i++) {
    const s = slots.takeNear(0, known, ring, hash, 1.25, false);
    assert.equal(s, home, 'sequential requests of one session stay');
    slots.release(0, s);
  }
  // A burst: each held. Bound = ceil(1.25 × (total + 1) / 3).
  const taken: number[] = [];
  for (let i = 0; i < 30; i++) taken.push(slots.takeNear(0, known, ring, hash, 1.25, false));
  const perSlot = [0, 1, 2].map((s) => taken.filter((t) => t === s).length);
  assert.ok(perSlot[home]! <= Math.ceil((1.25 * 30) / 3), `home got ${perSlot[home]} of 30: bounded`);
  assert.ok(perSlot[home]! >= 10, `home got ${perSlot[home]}: it keeps its share`);
  assert.equal(perSlot.reduce((a, b) => a + b), 30);
  // With a huge factor, the session never leaves home.
  for (const s of taken) slots.release(0, s);
  for (let i = 0; i < 20; i++) assert.equal(slots.takeNear(0, known, ring, hash, 100, false), home);
});

test('takeNear skips a replica out of rotation, at its concurrency or cache-full, and falls back to the plain choice', () => {
  const { slots, control, known } = table(3, { concurrency: 2, scored: true });
  const ring = ringOf(['http://a:1', 'http://b:1', 'http://c:1']);
  const hash = hashKey('conversation-2');
  const home = ring.owners[ring.first(hash)]!;
  control.setState(home, 3); // BUSY: out of rotation
  const moved = slots.takeNear(0, known, ring, hash, 100, false);
  assert.notEqual(moved, home);
  slots.release(0, moved);
  control.setState(home, READY);
  assert.equal(slots.takeNear(0, known, ring, hash, 100, false), home);
  assert.equal(slots.takeNear(0, known, ring, hash, 100, false), home);
  assert.notEqual(slots.takeNear(0, known, ring, hash, 100, false), home, 'home is at its concurrency (2)');
  for (let s = 0; s < 3; s++) while (slots.inflight(s) > 0) slots.release(0, s);
  control.publishReading(home, 0, true, control.taken(home));
  assert.notEqual(slots.takeNear(0, known, ring, hash, 100, false), home, 'home is cache-full and others are not');
});

test('with loads read: requests overdue for a status line count in the score, at most what is in flight; a dead thread gives its share back', () => {
  const control = SlotControl.create(2, 2, 0, true);
  const slots = new SlotTable(control.init);
  const known = new Int32Array(2);
  for (let i = 0; i < 2; i++) {
    control.claim();
    control.setState(i, READY);
    known[i] = control.gen(i);
  }
  // Slot 0 says it is idle; slot 1 has a queue of 5.
  control.publishReading(0, 0, false, control.taken(0));
  control.publishReading(1, 5, false, control.taken(1));
  for (let i = 0; i < 4; i++) assert.equal(slots.take(1, known, -1, false), 0, 'the empty queue takes them');
  // A new reading: what was sent before it no longer counts, and slot 0 still says 0.
  control.publishReading(0, 0, false, control.taken(0));
  assert.equal(slots.take(0, known, -1, false), 0);
  slots.release(0, 0);
  // Thread 1's four requests wait past a reading interval: overdue, they weigh 4; 4 < 5, still slot 0.
  for (let i = 0; i < 4; i++) slots.addOverdue(1, 0, 1);
  assert.equal(control.overdue(0), 4);
  assert.equal(slots.take(0, known, -1, false), 0);
  slots.release(0, 0);
  // Counted beyond what is in flight (a count not yet taken back), it weighs no more than in flight: 4 < 5.
  slots.addOverdue(0, 0, 1);
  assert.equal(slots.take(0, known, -1, false), 0);
  // Now 5 in flight, 5 overdue: a score of 5, like slot 1's queue; fewer in flight wins.
  assert.equal(slots.take(0, known, -1, false), 1);
  slots.release(0, 1);
  slots.release(0, 0);
  slots.addOverdue(0, 0, -1);
  // Thread 1 dies: its requests and their overdue count go back.
  assert.equal(control.reclaim(1), 4);
  assert.equal(control.overdue(0), 0);
  assert.equal(slots.take(0, known, -1, false), 0);
});

test('an ejected replica is never taken, plainly or near a session, yet may be retired when idle; an answer ends a run of failures', () => {
  const { slots, control, known } = table(2);
  assert.equal(slots.failed(0), 1);
  assert.equal(slots.failed(0), 2);
  slots.answered(0);
  assert.equal(control.failures(0), 0);
  control.setState(0, EJECTED);
  for (let i = 0; i < 4; i++) assert.equal(slots.take(0, known, -1, false), 1);
  const ring = ringOf(['http://a', 'http://b']);
  for (let i = 0; i < 16; i++) assert.equal(slots.takeNear(0, known, ring, hashKey(`session-${i}`), 1.25, false), 1);
  assert.equal(control.retireIfIdle(0), true, 'idle and ejected: retired');
  assert.equal(slots.state(0), BUSY);
  control.setState(1, EJECTED);
  assert.equal(control.retireIfIdle(1), false, 'requests in flight keep it');
  assert.equal(slots.state(1), EJECTED);
});
