// workers: 2 — a burst of 200 concurrent requests to a cold launched service, arriving on both
// workers, all succeed, and exactly one replica is started (one replica set for the process).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Agent, request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { RECORDING_REPLICA, recordFile, recorded, transitions } from '../helpers/launched.js';
import { eventually } from '../helpers/wait.js';

let tg: TestGateway | undefined;
const agent = new Agent({ connections: 250 });

after(async () => {
  await tg?.close();
  await agent.close();
});

test('workers: 2 — a 200-request burst on a cold service starts exactly one replica and every request succeeds', async () => {
  const file = recordFile();
  tg = await startTestGateway(
    rawService({ command: [process.execPath, RECORDING_REPLICA], env: { START_DELAY_MS: '1000', RECORD_FILE: file }, readyPath: '/health', max: 1 }),
    { workers: 2 },
  );
  const answers = await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const res = await request(tg!.url('/echo'), { method: 'POST', headers: AUTH, body: `request ${i}`, dispatcher: agent });
      return { status: res.statusCode, body: (await res.body.json()) as { pid: number; body: string } };
    }),
  );
  answers.forEach((answer, i) => {
    assert.equal(answer.status, 200, `request ${i}`);
    assert.equal(answer.body.body, `request ${i}`, `request ${i} got its own answer`);
  });
  assert.equal(new Set(answers.map((a) => a.body.pid)).size, 1, 'one replica served them all');
  assert.equal(transitions(tg.logs, 'starting').length, 1, 'exactly one replica was started');
  assert.equal(recorded(file).filter((line) => line.split(' ')[1] === 'POST').length, 200, 'each request reached the replica once');
  // A worker's log lines reach the log a moment after its answers (batched through the main thread).
  await eventually(() => tg!.logs.filter((l) => l.msg === 'request').length === 200, 10_000, 'the 200 access log lines');
  const served = tg.logs.filter((l) => l.msg === 'request');
  const byWorker = new Set(served.map((l) => l.worker));
  assert.deepEqual([...byWorker].sort(), [0, 1], 'both workers relayed part of the burst');
  assert.ok(served.every((l) => typeof l.queuedMs === 'number'), 'every request waited in the one queue');
});
