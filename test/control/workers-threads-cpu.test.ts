// workers: 2 — under load, the relaying is carried by two threads, not one: CPU time per thread
// of the gateway process, from /proc/<pid>/task/<tid>/stat, before and after a few thousand
// requests sent over connections known to reach each worker.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { AUTH, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { type CliGateway, connectionsOnEveryWorker, startCliGateway, threadTicks, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

let gw: CliGateway | undefined;
let replica: TestReplica | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.destroy().catch(() => undefined);
  if (gw !== undefined && gw.child.exitCode === null) gw.child.kill('SIGKILL');
  await replica?.close();
});

const PER_CONNECTION = 500;

test('workers: 2 — at least two threads carry the relaying', { skip: process.platform !== 'linux' && 'needs /proc' }, async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  gw = await startCliGateway({
    workers: 2,
    services: [{ slug: 'svc', tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: [replica.url] } }],
  });
  const pid = gw.child.pid!;
  const byWorker = await connectionsOnEveryWorker(gw, gw.origin, 2, 3);
  open.push(...byWorker.flat());
  const before = await threadTicks(pid);
  await Promise.all(
    byWorker.flat().map(async (c) => {
      for (let i = 0; i < PER_CONNECTION; i++) {
        const res = await c.client.request({ path: '/api/v1/services/svc/request/v1/x', method: 'POST', headers: AUTH, body: '{"prompt":"hi"}' });
        assert.equal(res.statusCode, 200);
        await res.body.dump();
      }
    }),
  );
  const afterTicks = await threadTicks(pid);
  const used = [...afterTicks]
    .filter(([tid]) => tid !== pid) // the main thread: the control plane and the log writer
    .map(([tid, ticks]) => ({ tid, ticks: ticks - (before.get(tid) ?? 0), name: comm(pid, tid) }))
    .sort((a, b) => b.ticks - a.ticks);
  const [first, second] = used;
  console.log(`busiest threads (ticks): ${used.slice(0, 5).map((t) => `${t.name}=${t.ticks}`).join(' ')}`);
  // Each connection stayed on its worker (a reconnect could have moved it to the other one).
  const served = (w: number): number => gw!.logs.filter((l) => l.msg === 'request' && l.worker === w).length;
  await eventually(() => served(0) === 3 * PER_CONNECTION && served(1) === 3 * PER_CONNECTION, 10_000, "each worker's access lines");
  assert.ok(first !== undefined && second !== undefined);
  assert.ok(second.ticks >= 5, `a second thread relayed too (${second.ticks} ticks)`);
  assert.ok(second.ticks * 4 >= first.ticks, `the relaying is spread, not carried by one thread (${first.ticks} vs ${second.ticks} ticks)`);
});

function comm(pid: number, tid: number): string {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}
