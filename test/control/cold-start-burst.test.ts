// A burst of 200 concurrent requests to a cold service whose replica takes about 1.5 s to load,
// with one worker and with two (the burst arriving on both): every one succeeds with its own body,
// every one waited in the one queue, and exactly one replica is started (max 1).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Agent, request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { RECORDING_REPLICA, recordFile, recorded, transitions } from '../helpers/launched.js';
import { eventually } from '../helpers/wait.js';

const gateways: TestGateway[] = [];
const agent = new Agent({ connections: 250 });

after(async () => {
  for (const tg of gateways) await tg.close();
  await agent.close();
});

for (const workers of [1, 2]) {
  test(`workers: ${workers} — 200 concurrent requests to a cold service all succeed on the one replica started`, async () => {
    const file = recordFile();
    const tg = await startTestGateway(
      rawService({
        command: [process.execPath, RECORDING_REPLICA],
        env: { START_DELAY_MS: '1500', RECORD_FILE: file },
        readyPath: '/health',
        max: 1,
      }),
      { workers },
    );
    gateways.push(tg);
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const res = await request(tg.url('/echo'), { method: 'POST', headers: AUTH, body: `request ${i}`, dispatcher: agent });
        return { status: res.statusCode, body: (await res.body.json()) as { pid: number; body: string } };
      }),
    );
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 1400, `the replica took its 1.5 s to load (${elapsed} ms)`);
    const pids = new Set<number>();
    answers.forEach((answer, i) => {
      assert.equal(answer.status, 200, `request ${i}`);
      assert.equal(answer.body.body, `request ${i}`, `request ${i} got its own answer`);
      pids.add(answer.body.pid);
    });
    assert.equal(pids.size, 1, 'one replica served them all');
    assert.equal(transitions(tg.logs, 'starting').length, 1, 'exactly one replica was started');
    const lines = recorded(file).map((line) => line.split(' '));
    const health = lines.find((l) => l[1] === 'HEALTH');
    const arrivals = lines.filter((l) => l[1] === 'POST');
    assert.equal(arrivals.length, 200, 'each request reached the replica once');
    assert.ok(health !== undefined, 'the replica recorded its first readiness answer');
    // Reported, not asserted (timing belongs to the benchmarks): readiness answer → first request.
    const firstArrival = Math.min(...arrivals.map((l) => Number(l[3])));
    const lastArrival = Math.max(...arrivals.map((l) => Number(l[3])));
    console.log(`# workers: ${workers}: ready→first queued request ${(firstArrival - Number(health[3])).toFixed(2)} ms, →all 200 ${(lastArrival - Number(health[3])).toFixed(2)} ms`);
    // A worker's log lines reach the log a moment after its answers (batched through the main thread).
    const served = () => tg.logs.filter((l) => l.msg === 'request');
    await eventually(() => served().length === 200, 10_000, 'the 200 access log lines');
    assert.ok(served().every((l) => typeof l.queuedMs === 'number'), 'all 200 waited in the one queue');
    if (workers === 2) assert.deepEqual([...new Set(served().map((l) => l.worker))].sort(), [0, 1], 'both workers relayed part of the burst');
  });
}
