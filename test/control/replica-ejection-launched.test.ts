// Ejection of launched replicas (docs/operations.md#ejected-replicas): a launched replica that
// resets every request is ejected like a static one, the other replica takes every request, and
// the ejected one, idle, is still stopped by `idleTimeoutMs`.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { RECORDING_REPLICA, transitions } from '../helpers/launched.js';
import { eventually } from '../helpers/wait.js';

process.env['NODE_ENV'] = 'test';
process.env['SLUICE_TEST_HOOKS'] = '1';
process.env['SLUICE_TEST_REPLICA_TUNING'] = JSON.stringify({ ejectionBaseMs: 600_000 });

const open: TestGateway[] = [];
after(async () => {
  for (const tg of open.splice(0)) await tg.close();
});

async function post(tg: TestGateway, path: string): Promise<{ status: number; pid: number | undefined }> {
  const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body: 'x' });
  const text = await res.body.text();
  return { status: res.statusCode, pid: res.statusCode === 200 ? (JSON.parse(text) as { pid: number }).pid : undefined };
}

test('a launched replica that resets is ejected; the other serves; idle through its ejection, it is stopped', async () => {
  const resetFile = join(mkdtempSync(join(tmpdir(), 'sluice-test-')), 'reset-pids');
  const tg = await startTestGateway(
    rawService({ command: [process.execPath, RECORDING_REPLICA], readyPath: '/health', min: 1, max: 2, concurrency: 1, idleTimeoutMs: 2_000, env: { RESET_FILE: resetFile } }),
    { workers: 1 },
  );
  open.push(tg);
  // Two requests at once with concurrency 1: the second starts the second replica.
  const both = await Promise.all([post(tg, '/slow?ms=300'), post(tg, '/slow?ms=300')]);
  assert.deepEqual(both.map((r) => r.status), [200, 200]);
  await eventually(() => transitions(tg.logs, 'ready').length === 2, 20_000, 'two replicas ready');
  const spawned = tg.logs.filter((l) => l['msg'] === 'replica process spawned');
  const pidOf = new Map(spawned.map((l) => [l['replica'] as string, l['pid'] as number]));
  writeFileSync(resetFile, `${pidOf.get('svc-1')}\n`);

  const statuses: number[] = [];
  while (tg.logs.every((l) => l['msg'] !== 'replica ejected')) {
    assert.ok(statuses.length < 60, 'ejected within 60 requests');
    statuses.push((await post(tg, '/echo')).status);
  }
  assert.equal(statuses.filter((s) => s === 502).length, 3, 'three resets in a row');
  const ejected = tg.logs.find((l) => l['msg'] === 'replica ejected')!;
  assert.equal(ejected['replica'], 'svc-1');
  assert.equal(ejected['reason'], 'reset');

  // The other replica takes every request; the ejected one, idle, is stopped by idleTimeoutMs.
  const idleStop = (): boolean => tg.logs.some((l) => l['msg'] === 'replica state' && l['replica'] === 'svc-1' && l['to'] === 'draining' && l['reason'] === 'idle');
  let served = 0;
  while (!idleStop()) {
    assert.ok(served < 20_000, 'the ejected replica, idle, is stopped before 20000 requests');
    const answer = await post(tg, '/echo');
    assert.equal(answer.status, 200);
    assert.equal(answer.pid, pidOf.get('svc-2'));
    served++;
  }
  await eventually(() => transitions(tg.logs, 'stopped').some((l) => l['replica'] === 'svc-1'), 10_000, 'svc-1 stopped');
  assert.ok(transitions(tg.logs, 'draining').every((l) => l['replica'] === 'svc-1'), 'the replica in use was not stopped');
});
