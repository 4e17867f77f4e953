// Launched replicas through the gateway: idle stop and cold restart, scaling out to `max` while
// replicas are at their `concurrency` and back to `min`, a replica killed mid-stream, and no
// replica process outliving the gateway.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Agent, request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { isAlive, RECORDING_REPLICA, transitions } from '../helpers/launched.js';
import { eventually } from '../helpers/wait.js';

const agent = new Agent({ connections: 50 });
after(() => agent.close());

async function echo(tg: TestGateway, path = '/echo'): Promise<{ status: number; pid: number }> {
  const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body: 'x', dispatcher: agent });
  const body = (await res.body.json()) as { pid: number };
  return { status: res.statusCode, pid: body.pid };
}

function replicaPids(tg: TestGateway): number[] {
  return tg.logs.filter((l) => l.msg === 'replica process spawned').map((l) => Number(l.pid));
}

test('an idle replica is stopped after idleTimeoutMs and the next request cold-starts a new one', async () => {
  const tg = await startTestGateway(rawService({ command: [process.execPath, RECORDING_REPLICA], readyPath: '/health', idleTimeoutMs: 400 }));
  try {
    const first = await echo(tg);
    assert.equal(first.status, 200);
    await eventually(() => !isAlive(first.pid), 10_000, 'the idle replica process to exit');
    const second = await echo(tg);
    assert.equal(second.status, 200);
    assert.notEqual(second.pid, first.pid, 'a new replica served the next request');
    assert.equal(transitions(tg.logs, 'starting').length, 2);
  } finally {
    await tg.close();
  }
});

test('concurrency 2, max 3: six slow requests run on three replicas; after the idle timeout min remain', async () => {
  const tg = await startTestGateway(
    rawService({ command: [process.execPath, RECORDING_REPLICA], readyPath: '/health', concurrency: 2, max: 3, min: 1, idleTimeoutMs: 500 }),
  );
  try {
    const answers = await Promise.all(Array.from({ length: 6 }, () => echo(tg, '/slow?ms=1500')));
    assert.ok(answers.every((a) => a.status === 200));
    const pids = new Set(answers.map((a) => a.pid));
    assert.equal(pids.size, 3, 'three replicas served the six requests');
    for (const pid of pids) {
      assert.equal(answers.filter((a) => a.pid === pid).length, 2, 'two requests each (concurrency 2)');
    }
    await eventually(() => [...pids].filter(isAlive).length === 1, 15_000, 'the extra replicas to stop');
    const again = await echo(tg);
    assert.equal(again.status, 200);
    assert.ok(pids.has(again.pid), 'the min replica kept running and served the next request');
  } finally {
    await tg.close();
  }
});

test('a replica killed mid-stream: the stream ends uncleanly, the replica is replaced, the next request succeeds; no orphans', async () => {
  const tg = await startTestGateway(rawService({ command: [process.execPath, RECORDING_REPLICA], readyPath: '/health', min: 1 }));
  let pids: number[] = [];
  try {
    const res = await request(tg.url('/stream'), { method: 'POST', headers: AUTH, body: 'x', dispatcher: agent });
    assert.equal(res.statusCode, 200);
    let received = '';
    let victim = 0;
    const ended = (async () => {
      for await (const chunk of res.body) {
        received += (chunk as Buffer).toString();
        if (victim === 0 && received.includes('tick 3')) {
          victim = replicaPids(tg)[0]!;
          process.kill(victim, 'SIGKILL');
        }
      }
    })();
    await assert.rejects(ended, 'the caller sees a chunked body with no final chunk');
    assert.ok(received.includes('tick 3'));
    await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.outcome === 'upstream_error'), 5000, 'the upstream_error log line');
    // A request sent before the gateway has seen the process exit may still meet the dying replica
    // (a reset connection is never retried: its bytes may have reached it). Wait for the exit.
    await eventually(
      () => tg.logs.some((l) => l.msg === 'replica state' && l.replica === 'svc-1' && (l.to === 'failed' || l.to === 'stopped')),
      5000,
      'the gateway to see the killed replica go',
    );
    const next = await echo(tg);
    assert.equal(next.status, 200);
    assert.notEqual(next.pid, victim, 'a replacement replica served it');
    pids = replicaPids(tg);
  } finally {
    await tg.close();
  }
  assert.ok(pids.length >= 2);
  for (const pid of pids) assert.equal(isAlive(pid), false, `replica ${pid} does not outlive the gateway`);
});
