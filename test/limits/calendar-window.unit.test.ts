// The calendar windows of tokensPerDay and tokensPerMonth (src/limits/calendar-window.ts) with
// the time given: a day ends at 24:00 UTC, a month at the first of the next (December into
// January, February of a leap year), a thread's cached month moves on when the clock leaves it.
// The window rolling over in the limit table: a day's bucket of an earlier day counts nothing
// today, however full it was, while today's refuses until midnight.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Calendar, dayOf, monthOf, monthStartAt, nextDayAt, secondsUntil } from '../../src/limits/calendar-window.js';
import { DAY, HEADER, MONTH, STRIDE } from '../../src/limits/limit-layout.js';
import { LimitControl } from '../../src/limits/limit-control.js';
import { createLimitBuffer } from '../../src/limits/limit-memory.js';
import { LimitTable, tokenLimit } from '../../src/limits/limit-table.js';
import { settleBucket } from '../../src/limits/token-window.js';

const at = (iso: string): number => Date.parse(iso);

test('a day: 00:00 to 24:00 UTC, whatever the time zone', () => {
  assert.equal(nextDayAt(at('2026-11-28T23:59:59.999Z')), at('2026-11-29T00:00:00Z'));
  assert.equal(nextDayAt(at('2026-11-29T00:00:00Z')), at('2026-11-30T00:00:00Z'));
  assert.equal(dayOf(at('2026-11-28T23:59:59.999Z')) + 1, dayOf(at('2026-11-29T00:00:00Z')));
  assert.equal(secondsUntil(at('2026-11-28T23:59:59.999Z'), at('2026-11-29T00:00:00Z')), 1);
  assert.equal(secondsUntil(at('2026-11-28T12:00:00.5Z'), at('2026-11-29T00:00:00Z')), 43_200);
  assert.equal(secondsUntil(at('2026-11-29T00:00:00Z'), at('2026-11-29T00:00:00Z')), 1, 'never 0');
});

test('a month: the calendar month in UTC, December into January, a leap February', () => {
  const dec = monthOf(at('2026-12-31T23:59:59Z'));
  assert.equal(monthStartAt(dec + 1), at('2027-01-01T00:00:00Z'));
  assert.equal(monthOf(at('2027-01-01T00:00:00Z')), dec + 1);
  const feb = monthOf(at('2028-02-29T12:00:00Z'));
  assert.equal(monthStartAt(feb), at('2028-02-01T00:00:00Z'));
  assert.equal(monthStartAt(feb + 1), at('2028-03-01T00:00:00Z'));
  assert.equal(monthOf(at('1970-01-01T00:00:00Z')), 0);
});

test("a thread's calendar follows the clock out of its month and back", () => {
  const c = new Calendar();
  c.at(at('2027-01-31T23:59:59.999Z'));
  const jan = c.month;
  assert.equal(c.monthEnd, at('2027-02-01T00:00:00Z'));
  c.at(at('2027-02-01T00:00:00Z'));
  assert.equal(c.month, jan + 1);
  assert.equal(c.monthEnd, at('2027-03-01T00:00:00Z'));
  c.at(at('2027-01-15T00:00:00Z')); // a clock stepped back
  assert.equal(c.month, jan);
});

test('the day rolls over: an earlier day spent counts nothing today; today spent refuses until midnight', () => {
  const buffer = createLimitBuffer(2, 1);
  const table = new LimitTable(buffer);
  const control = new LimitControl(buffer);
  const a = new Int32Array(buffer);
  const t = tokenLimit(table, 1, { tokensPerDay: 100, tokensPerMonth: 1000 }, '');
  const cell = HEADER + STRIDE;
  const now = Date.now();
  // Yesterday's 100 tokens: today counts none of them.
  settleBucket(a, cell + DAY, dayOf(now) - 1, 100);
  assert.equal(table.admit(t, false, 10), undefined);
  table.end(t, 10, 100); // today: 100 of the day, 100 of the month
  const use = control.use(1, t.limits);
  assert.equal(use.tokensPerDay?.used, 100);
  assert.equal(use.tokensPerMonth?.used, 100);
  const before = Date.now();
  assert.equal(table.admit(t, false, 0), 'tokensPerDay');
  const after = Date.now();
  if (dayOf(before) === dayOf(after)) {
    assert.ok(table.retryAfter >= Math.max(1, Math.floor((nextDayAt(after) - after) / 1000)) && table.retryAfter <= Math.ceil((nextDayAt(before) - before) / 1000), `retryAfter ${table.retryAfter}`);
  }
  // An earlier month's bucket, full, counts nothing this month either.
  const m = tokenLimit(table, 0, { tokensPerMonth: 50 }, '');
  settleBucket(a, HEADER + MONTH, monthOf(now) - 1, 50);
  assert.equal(table.admit(m, false, 0), undefined);
  table.end(m, 0, 50);
  assert.equal(table.admit(m, false, 0), 'tokensPerMonth');
  assert.equal(control.refusals(0, 4), 1);
});
