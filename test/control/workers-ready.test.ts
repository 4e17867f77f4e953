// workers: 2 — ready means every worker listens. A client that opens its keep-alive connections
// the moment /readyz says 200 spreads them over both threads (the kernel spreads connections
// only over the threads that listen then); before that /readyz says 503 `starting`; and
// `gateway listening` is logged after every `worker listening`.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client, request } from 'undici';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { closedPort } from '../helpers/replica.js';
import { CLI, workerOf } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const CONNECTIONS = 16;
let child: ChildProcess | undefined;
const clients: Client[] = [];

after(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  if (child !== undefined && child.exitCode === null) child.kill('SIGKILL');
});

test('workers: 2 — /readyz says 200 only once both workers listen: connections opened then reach both', async () => {
  // A fixed port, so /readyz can be asked from the first moment (startCliGateway waits for the log line).
  const port = await closedPort();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-ready-'));
  const configFile = join(dir, 'config.json');
  const config = { listen: { host: '127.0.0.1', port }, workers: 2, services: [{ slug: 'svc', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: ['http://127.0.0.1:9'] } }] };
  writeFileSync(configFile, JSON.stringify(config));
  child = spawn(process.execPath, [CLI, 'serve', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: Record<string, unknown>[] = [];
  let partial = '';
  let output = '';
  child.stdout!.on('data', (d: Buffer) => {
    output += d.toString();
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.startsWith('{')) logs.push(JSON.parse(line) as Record<string, unknown>);
  });
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));

  // Ask /readyz until it says 200 (refused connections while nothing listens yet).
  const before: string[] = [];
  await eventually(
    async () => {
      if (child!.exitCode !== null) throw new Error(`the gateway exited: ${output}`);
      const answer = await request(`http://127.0.0.1:${port}/readyz`, { reset: true })
        .then(async (res) => ({ status: res.statusCode, body: await res.body.text() }))
        .catch(() => undefined);
      if (answer === undefined) return false;
      if (answer.status === 200) return true;
      before.push(`${answer.status} ${answer.body}`);
      return false;
    },
    20_000,
    '/readyz to say 200',
  );
  for (const answer of new Set(before)) assert.equal(answer, '503 {"status":"starting"}', 'before it is ready');

  // At once: keep-alive connections, each with a first (refused) request whose log line names its worker.
  for (let i = 0; i < CONNECTIONS; i++) clients.push(new Client(`http://127.0.0.1:${port}`, { pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 30_000 }));
  const ids = await Promise.all(
    clients.map(async (client) => {
      const res = await client.request({ path: '/api/v1/services/no-such-service/request/x', method: 'POST', body: '' });
      await res.body.dump();
      assert.equal(res.statusCode, 404);
      return String(res.headers['x-request-id']);
    }),
  );
  const source = { logs };
  const workers = await Promise.all(ids.map((id) => workerOf(source, id)));
  const perWorker = [0, 1].map((w) => workers.filter((x) => x === w).length);
  assert.ok(perWorker[0]! > 0 && perWorker[1]! > 0, `both workers serve some of the ${CONNECTIONS} connections (${perWorker.join(' and ')})`);

  // The log: each worker said it listens before the gateway did.
  const at = (match: (l: Record<string, unknown>) => boolean): number => logs.findIndex(match);
  const gateway = at((l) => l.msg === 'gateway listening');
  assert.ok(gateway >= 0, 'gateway listening is logged');
  for (const w of [0, 1]) {
    const worker = at((l) => l.msg === 'worker listening' && l.worker === w);
    assert.ok(worker >= 0 && worker < gateway, `worker ${w} listening (line ${worker}) before gateway listening (line ${gateway})`);
    assert.equal(logs[worker]!.port, port);
  }
  assert.equal(logs.filter((l) => l.msg === 'worker listening').length, 2, 'once per worker');
});
