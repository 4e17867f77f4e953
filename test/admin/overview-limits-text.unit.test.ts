// The overview page's wording of a service's limited tokens (src/admin/ui/routing-text.js, shipped
// as is and run in the browser), from /status's `limits`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { UI_DIR } from '../../src/admin/page.js';

const { limitsText } = (await import(pathToFileURL(`${UI_DIR}routing-text.js`).href)) as { limitsText(limits: unknown): string };

test("one line per limited token, each limit it has with what is used of it", () => {
  assert.equal(
    limitsText([
      { token: 'chat', requestsPerMinute: { limit: 60, used: 12 }, concurrent: { limit: 4, used: 3 }, tokensPerMinute: { limit: 100000, used: 41200, reserved: 6000 } },
      { token: 'batch', tokensPerMinute: { limit: 5000, used: 0, reserved: 0 } },
    ]),
    'chat: 12 of 60 requests/min · 3 of 4 in flight · 41200 of 100000 tokens/min (6000 reserved)\nbatch: 0 of 5000 tokens/min',
  );
  assert.equal(limitsText([]), '');
  assert.equal(limitsText(undefined), '', 'an older gateway without the field');
});

test('tokensPerDay and tokensPerMonth: used of the limit, and when each resets (UTC)', () => {
  assert.equal(
    limitsText([
      {
        token: 'team',
        tokensPerDay: { limit: 2000000, used: 812000, reserved: 0, resetsAt: '2026-11-29T00:00:00.000Z' },
        tokensPerMonth: { limit: 50000000, used: 9100000, reserved: 0, resetsAt: '2026-12-01T00:00:00.000Z' },
      },
    ]),
    'team: 812000 of 2000000 tokens/day UTC, resets 00:00 UTC · 9100000 of 50000000 tokens/month UTC, resets 2026-12-01',
  );
});
