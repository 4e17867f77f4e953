// The overview page's wording of a service's replica choice and load readings (src/admin/ui/
// routing-text.js, shipped as is and run in the browser), from /status's `routing` and `loads`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { UI_DIR } from '../../src/admin/page.js';

interface RoutingText {
  routingText(routing: unknown): string;
  loadsText(loads: unknown): string;
  ejectionsText(ejections: unknown, now: number): string;
}

const { routingText, loadsText, ejectionsText } = (await import(pathToFileURL(`${UI_DIR}routing-text.js`).href)) as RoutingText;

test('the policy, with the affinity header when there is one', () => {
  assert.equal(routingText({ policy: 'fewest-in-flight', affinityHeader: null }), 'fewest in flight');
  assert.equal(routingText({ policy: 'queue-aware', affinityHeader: null }), 'queue-aware (the replicas’ own queues)');
  assert.equal(routingText({ policy: 'queue-aware', affinityHeader: 'x-session-id' }), 'queue-aware (the replicas’ own queues) · sessions by x-session-id');
  const prefix = { blockBytes: 256, maxBlocks: 64, indexSize: 8192, requests: 9, blocks: 100, matched: 62, hitRate: 0.62 };
  assert.equal(routingText({ policy: 'fewest-in-flight', affinityHeader: null, prefix: { ...prefix, replicas: [{ replica: 'svc-1', requests: 5, blocks: 50, matched: 35, hitRate: 0.7 }, { replica: 'svc-2', requests: 0, blocks: 0, matched: 0, hitRate: null }] } }), 'fewest in flight · prompt prefixes: 62 % expected cache hits (svc-1 70 %)');
  assert.equal(routingText({ policy: 'fewest-in-flight', affinityHeader: null, prefix: { ...prefix, blocks: 0, matched: 0, hitRate: null, replicas: [] } }), 'fewest in flight · prompt prefixes: no blocks yet');
  assert.equal(routingText(undefined), '', 'an older gateway without the field');
});

test('each reading on its line: waiting, running, cache, age; or why the replica is weighed by in flight', () => {
  assert.equal(
    loadsText([
      { replica: 'llm-1', waiting: 3, running: 12, cacheUsage: 0.424, ageMs: 120, used: true, problem: null },
      { replica: 'llm-2', waiting: 0, running: null, cacheUsage: null, ageMs: 2500, used: true, problem: null },
      { replica: 'llm-3', waiting: 7, cacheUsage: 0.5, ageMs: 4000, used: false, problem: 'stale (no reading for 4000 ms)' },
      { replica: 'llm-4', waiting: null, cacheUsage: null, ageMs: null, used: false, problem: null },
    ]),
    ['llm-1: 3 waiting · 12 running · cache 42 % · 120 ms ago', 'llm-2: 0 waiting · 2.5 s ago', 'llm-3: weighed by in flight (stale (no reading for 4000 ms))', 'llm-4: weighed by in flight'].join('\n'),
  );
  assert.equal(loadsText([]), '');
  assert.equal(loadsText(undefined), '');
});

test('each ejected replica on its line: why, when it is back, how often; or back in rotation', () => {
  const now = Date.parse('2026-11-25T12:00:00.000Z');
  assert.equal(
    ejectionsText(
      [
        { replica: 'llm-1', ejected: true, until: '2026-11-25T12:00:24.200Z', reason: 'reset', ejections: 2 },
        { replica: 'llm-2', ejected: false, until: null, reason: 'timeout', ejections: 1 },
      ],
      now,
    ),
    ['llm-1: ejected (reset), back in 25 s · ejected 2 times', 'llm-2: back in rotation · ejected once (last: timeout)'].join('\n'),
  );
  assert.equal(ejectionsText([], now), '');
  assert.equal(ejectionsText(undefined, now), '', 'an older gateway without the field');
});
