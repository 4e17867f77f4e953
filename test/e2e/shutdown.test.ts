// Shutdown: SIGTERM while streams are in flight and requests are queued —
// both behind a busy replica and behind one that is still starting. The listener closes and
// /readyz turns 503; queued requests get `503 draining`; a stream that ends within
// drainTimeoutMs finishes whole, one that does not is cut (truncated, never ended cleanly) when
// the timeout comes; the process exits 0 and leaves no replica process behind.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process.js';
import { RECORDING_REPLICA, isAlive, recordFile, recorded } from '../helpers/launched.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const DRAIN_TIMEOUT_MS = 3000;

let replica: TestReplica;
let gw: GatewayProcess;
const record = recordFile();
let finish!: () => void;
const finishing = new Promise<void>((resolve) => (finish = resolve));

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'text/plain' });
    if (req.url === '/finite') {
      // Ten parts, the last five once the test has seen the drain begin: in flight through it
      // however slow the machine, and then over at once, well within the drain timeout.
      for (let i = 0; i < 10; i++) {
        if (i === 5) await finishing;
        res.write(`part ${i}\n`);
      }
      res.end('done\n');
      return;
    }
    // `/forever`: a part every 50 ms until the connection closes.
    let n = 0;
    const timer = setInterval(() => res.write(`tick ${n++}\n`), 50);
    res.on('close', () => clearInterval(timer));
    res.write(`tick ${n++}\n`);
  });
  const tokens = [{ name: 't', sha256: TEST_TOKEN_SHA256 }];
  const launched = (env: Record<string, string>, extra: Record<string, unknown>) => ({
    command: [process.execPath, RECORDING_REPLICA],
    env: { RECORD_FILE: record, ...env },
    readyPath: '/health',
    ...extra,
  });
  gw = await startGatewayProcess(
    {
      drainTimeoutMs: DRAIN_TIMEOUT_MS,
      log: { level: 'info' },
      services: [
        { slug: 'static', tokens, replicas: { urls: [replica.url] } },
        // One replica running from the start that takes one request at a time.
        { slug: 'busy', tokens, replicas: launched({}, { min: 1, max: 1, concurrency: 1 }) },
        // A replica that takes 30 s to load: a request to it waits in the queue.
        { slug: 'cold', tokens, replicas: launched({ START_DELAY_MS: '30000' }, {}) },
      ],
    },
    { admin: true },
  );
});

after(async () => {
  await gw?.stop();
  await replica?.close();
});

async function queued(slug: string): Promise<number> {
  const text = await (await request(`http://127.0.0.1:${gw.adminPort}/metrics`)).body.text();
  const line = text.split('\n').find((l) => l.startsWith(`sluice_queue_depth{service="${slug}",priority="0"} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

/** The first chunk of a streamed answer has arrived; the rest is collected. */
async function streaming(url: string): Promise<{ status: number; rest: Promise<string> }> {
  const res = await request(url, { method: 'POST', headers: AUTH, body: 'x' });
  const chunks: string[] = [];
  const iterator = res.body[Symbol.asyncIterator]();
  const first = await iterator.next();
  chunks.push(String(first.value));
  const rest = (async () => {
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) chunks.push(String(next.value));
    return chunks.join('');
  })();
  return { status: res.statusCode, rest };
}

test('SIGTERM with streams in flight and requests queued: drained, 503 draining, exit 0, no replica left', async () => {
  await eventually(() => recorded(record).some((l) => l.includes(' HEALTH ')), 15_000, 'the busy replica to be ready');
  const busyPid = Number(recorded(record).find((l) => l.includes(' HEALTH '))!.split(' ')[0]);

  const finite = await streaming(`${gw.base('static')}/finite`);
  const forever = await streaming(`${gw.base('static')}/forever`);
  assert.equal(finite.status, 200);
  assert.equal(forever.status, 200);
  // The busy replica's only slot: an answer that would take a minute.
  const slow = request(`${gw.base('busy')}/slow?ms=60000`, { method: 'POST', headers: AUTH, body: 'x' }).then(
    async (res) => ({ status: res.statusCode, body: await res.body.text().catch((err: Error) => `cut: ${err.message}`) }),
    (err: Error) => ({ status: 0, body: `cut: ${err.message}` }),
  );
  await eventually(() => recorded(record).some((l) => l.includes('POST /slow')), 10_000, 'the slow request to reach the busy replica');
  const behindBusy = request(`${gw.base('busy')}/echo`, { method: 'POST', headers: AUTH, body: 'queued' });
  await eventually(async () => (await queued('busy')) === 1, 10_000, 'a request queued behind the busy replica');
  const behindCold = request(`${gw.base('cold')}/echo`, { method: 'POST', headers: AUTH, body: 'queued' });
  await eventually(async () => (await queued('cold')) === 1, 10_000, 'a request queued for the cold replica');
  const spawned = (): number => (gw.output().match(/"msg":"replica process spawned"/g) ?? []).length;
  await eventually(() => spawned() === 2, 5000, 'the spawn of the cold replica to be logged');
  const pids = [...gw.output().matchAll(/\{[^\n]*"msg":"replica process spawned"[^\n]*\}/g)].map((m) => (JSON.parse(m[0]) as { pid: number }).pid);
  assert.equal(pids.length, 2, 'two replica processes: busy and cold');
  assert.ok(pids.includes(busyPid));

  gw.child.kill('SIGTERM');

  await eventually(
    async () => (await request(`http://127.0.0.1:${gw.adminPort}/readyz`).then(async (r) => (await r.body.dump(), r.statusCode))) === 503,
    5000,
    'readyz to turn 503',
  );
  finish(); // the stream that ends within the drain
  // Every worker closes its own listen socket on the drain message; /readyz (the main thread's
  // flag) may turn 503 a moment before the last one has, so wait for the refusal.
  const tryConnect = (): Promise<string> =>
    new Promise<string>((resolve) => {
      const socket = connect(gw.port, '127.0.0.1');
      socket.on('connect', () => (socket.destroy(), resolve('connected')));
      socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
  await eventually(async () => (await tryConnect()) === 'ECONNREFUSED', 5000, 'the relay listener to be closed');
  for (const [name, pending] of [['behind the busy replica', behindBusy], ['behind the cold start', behindCold]] as const) {
    const res = await pending;
    assert.equal(res.statusCode, 503, name);
    assert.equal(res.headers['x-sluice-error'], 'draining');
    assert.ok(Number(res.headers['retry-after']) > 0, 'Retry-After');
    assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'draining');
  }
  assert.equal(await finite.rest, Array.from({ length: 10 }, (_, i) => `part ${i}\n`).join('') + 'done\n', 'the stream that ends in time finished whole');
  await assert.rejects(forever.rest, 'the stream still running at the drain timeout is cut, not ended cleanly');
  const slowAnswer = await slow;
  assert.ok(slowAnswer.status !== 200 || slowAnswer.body.startsWith('cut:'), `the minute-long request did not complete: ${JSON.stringify(slowAnswer)}`);

  assert.equal(await gw.exited, 0, 'exit code 0');
  for (const pid of pids) assert.equal(isAlive(pid), false, `replica process ${pid} is gone`);
  assert.ok(!recorded(record).some((l) => l.includes('POST /echo')), 'no queued request reached a replica');
  const output = gw.output();
  assert.match(output, /"msg":"drain started"/);
  assert.match(output, /"msg":"gateway closed"/);
});
