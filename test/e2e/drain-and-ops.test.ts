// Operations: /healthz, /readyz and /metrics; SIGTERM drains (readyz 503, queued requests 503
// draining, the stream in flight finishes, exit 0). A taken port: port-in-use.test.ts.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { RECORDING_REPLICA } from '../helpers/launched.js';
import { closedPort, readBody, startReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

test('healthz, readyz and metrics on the relay listener', async () => {
  const replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('ok');
  });
  const tg = await startTestGateway(rawService({ urls: [replica.url] }));
  cleanups.push(() => tg.close(), () => replica.close());
  const health = await request(`${tg.origin}/healthz`);
  assert.equal(health.statusCode, 200);
  await health.body.dump();
  const ready = await request(`${tg.origin}/readyz`);
  assert.equal(ready.statusCode, 200);
  await ready.body.dump();
  const relayed = await request(tg.url('/x'), { method: 'POST', headers: AUTH, body: 'abc' });
  await relayed.body.dump();
  // With several workers, /metrics may be served by another thread while the relaying one is still
  // between writing the answer's last byte and counting the request.
  let metrics = '';
  await eventually(async () => {
    metrics = await (await request(`${tg.origin}/metrics`)).body.text();
    return /sluice_requests_total\{service="svc",status="200",outcome="ok"\} 1/.test(metrics);
  }, 5_000, 'the request counted');
  assert.match(metrics, /sluice_bytes_relayed_total\{service="svc",direction="in"\} 3/);
  assert.match(metrics, /sluice_time_to_first_byte_seconds_count\{service="svc"\} 1/);
  assert.match(metrics, /sluice_replicas\{service="svc",state="ready"\} 1/);
});

test('SIGTERM drains: readyz 503, queued requests 503 draining, the stream in flight completes, exit 0', async () => {
  // Service `stream`: a static replica that streams 10 parts, the last five once the test has seen
  // the drain begin (so the stream is in flight through it however slow the machine: the drain
  // ends when it does, and with it /readyz).
  let finish!: () => void;
  const finishing = new Promise<void>((resolve) => (finish = resolve));
  const replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'text/plain' });
    for (let i = 0; i < 10; i++) {
      if (i === 5) await finishing;
      res.write(`part ${i}\n`);
    }
    res.end('done\n');
  });
  cleanups.push(() => replica.close());
  const port = await closedPort();
  const adminPort = await closedPort();
  const dir = mkdtempSync(join(tmpdir(), 'sluice-drain-'));
  const configFile = join(dir, 'config.json');
  const token = [{ name: 't', sha256: TEST_TOKEN_SHA256 }];
  writeFileSync(
    configFile,
    JSON.stringify({
      listen: { host: '127.0.0.1', port },
      admin: { host: '127.0.0.1', port: adminPort },
      drainTimeoutMs: 10_000,
      services: [
        { slug: 'stream', tokens: token, replicas: { urls: [replica.url] } },
        // Service `cold`: its replica loads for 10 s, so a request to it waits in the queue.
        { slug: 'cold', tokens: token, replicas: { command: [process.execPath, RECORDING_REPLICA], env: { START_DELAY_MS: '10000' }, readyPath: '/health' } },
      ],
    }),
  );
  const child = spawn(process.execPath, [CLI, 'serve', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await eventually(() => output.includes('gateway listening'), 10_000, 'the gateway to listen');
  const base = `http://127.0.0.1:${port}/api/v1/services`;

  const streaming = await request(`${base}/stream/request/x`, { method: 'POST', headers: AUTH, body: 'x' });
  const streamed = streaming.body.text();
  const queued = request(`${base}/cold/request/x`, { method: 'POST', headers: AUTH, body: 'x' });
  await eventually(() => output.includes('replica process spawned'), 10_000, 'the cold replica to start');

  child.kill('SIGTERM');
  await eventually(
    async () => (await request(`http://127.0.0.1:${adminPort}/readyz`).then(async (r) => (await r.body.dump(), r.statusCode))) === 503,
    5000,
    'readyz to turn 503',
  );
  const queuedAnswer = await queued;
  assert.equal(queuedAnswer.statusCode, 503);
  assert.equal(((await queuedAnswer.body.json()) as { error: { code: string } }).error.code, 'draining');
  finish();
  assert.equal(await streamed, Array.from({ length: 10 }, (_, i) => `part ${i}\n`).join('') + 'done\n', 'the stream finished whole');
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0);
});
