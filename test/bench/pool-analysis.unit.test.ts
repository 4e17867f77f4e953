// The pool benchmark's arithmetic (bench/lib/pool-analysis.ts) on a made-up journal: which start
// is a swap and which replica it replaced, and what the gateway added beyond the replicas' own
// exit, load and first token.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { figures, lives, starts } from '../../bench/lib/pool-analysis.js';
import type { RequestResult } from '../../bench/lib/pool-trace.js';

const line = (e: string, m: string, pid: number, u: string, t: number, id?: number): string => JSON.stringify({ e, m, pid, u, t, ...(id === undefined ? {} : { id }) });

function request(id: number, model: string, sentAt: number, firstTokenAt: number, tokens = 3): RequestResult {
  return { id, model, status: 200, tokens, expected: 3, done: true, sentAt, firstTokenAt, endAt: firstTokenAt + 50 };
}

// chat starts cold on gpu:0 for request 0; coder's request 1 arrives while chat still answers
// (its last answer ends at 1,400); chat is stopped at 1,405, exits at 1,905; coder's process
// starts at 1,915, listens at 4,915, gets request 1 at 4,930, writes its first token at 4,931,
// which the client reads at 4,933.
const journal = [
  line('start', 'chat', 10, 'gpu:0', 5),
  line('listening', 'chat', 10, 'gpu:0', 3_005),
  line('recv', 'chat', 10, 'gpu:0', 3_020, 0),
  line('first', 'chat', 10, 'gpu:0', 3_021, 0),
  line('done', 'chat', 10, 'gpu:0', 1_400 + 2_000, 0),
  line('sigterm', 'chat', 10, 'gpu:0', 3_405),
  line('exit', 'chat', 10, 'gpu:0', 3_905),
  line('start', 'coder', 11, 'gpu:0', 3_915),
  line('listening', 'coder', 11, 'gpu:0', 6_915),
  line('recv', 'coder', 11, 'gpu:0', 6_930, 1),
  line('first', 'coder', 11, 'gpu:0', 6_931, 1),
  line('done', 'coder', 11, 'gpu:0', 7_000, 1),
  // Another pool's unit 0 is not this unit 0.
  line('start', 'embed', 12, 'other:0', 3_910),
  line('listening', 'embed', 12, 'other:0', 3_950),
].join('\n');

const results = [request(0, 'chat', 0, 3_023), request(1, 'coder', 3_000, 6_933)];

test('a start on units another model gave back is a swap; the gateway added what the replicas did not take', () => {
  const found = starts(lives(journal), results);
  assert.equal(found.length, 2); // embed served nothing
  const [cold, swap] = found;
  assert.equal(cold!.evicted, undefined);
  assert.equal(cold!.loadMs, 3_000);
  // sent 0 → first token 3,023: load 3,000, first token 1, so 22 added (5 to the spawn, 15 probe to request, 2 relay).
  assert.equal(cold!.addedMs, 22);
  assert.deepEqual(swap!.evicted, { model: 'chat', pid: 10 });
  assert.equal(swap!.exitMs, 500);
  assert.equal(swap!.loadMs, 3_000);
  // Free at 3,400 (chat's last answer, after the request was sent) → first token 6,933: 3,533 ms,
  // of which 500 exit, 3,000 load, 1 first token: 32 added.
  assert.equal(swap!.addedMs, 32);
  assert.deepEqual(swap!.parts, { decideMs: 5, exitToSpawnMs: 10, readyToRequestMs: 15, relayMs: 2 });
  assert.equal(swap!.ttftMs, 3_933);
});

test('figures count lost requests, swaps and cold starts', () => {
  const lost: RequestResult = { ...request(2, 'coder', 6_950, 6_960), tokens: 2, done: false };
  const { figures: f } = figures([...results, lost], lives(journal), 1);
  assert.equal(f.requests, 3);
  assert.equal(f.lost, 1);
  assert.equal(f.evictions, 1);
  assert.equal(f.swaps, 1);
  assert.equal(f.coldStarts, 1);
  assert.equal(f.swapAddedMs.p50, 32);
  assert.deepEqual(Object.keys(f.ttftByModel), ['chat', 'coder']);
  assert.equal(f.ttftByModel['coder']!.n, 1, 'only answered requests have a TTFT');
  assert.equal(f.waitedForStart, 2, 'requests 0 and 1 waited for a start; request 2 found coder ready');
});
