// `node dist/bench/micro/sequential-profile.js` (after `npm run build`): the real gateway
// (bench/gateway.ts) under `node --cpu-prof`, relaying MICRO_REQUESTS sequential requests (one at
// a time, one keep-alive connection, a tiny raw-socket client: no load generator) to the
// benchmark replica; then its CPU time per request and where it went.
// Settings: MICRO_REQUESTS (default 20000), MICRO_LOG_LEVEL (default info), MICRO_TOP (default 20).
// The gateway's log lines go to /dev/null (written, not kept).
import { openSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatSummary, readProfile, summarizeProfile } from '../cpuprofile.js';
import { type Child, installCleanup, startChild } from '../lib/children.js';
import { cpuSeconds } from '../lib/proc.js';
import { BENCH_SLUG, BENCH_TOKEN, INFER_PATH, INFER_REQUEST } from '../lib/workload.js';

const requests = Number(process.env['MICRO_REQUESTS'] ?? 20_000);
const logLevel = process.env['MICRO_LOG_LEVEL'] ?? 'info';
const top = Number(process.env['MICRO_TOP'] ?? 20);

const script = (name: string): URL => new URL(`../${name}.js`, import.meta.url);

/** Sends the request `count` times, each after the previous answer is complete. */
function sequential(port: number, count: number): Promise<void> {
  const head =
    `POST /api/v1/services/${BENCH_SLUG}/request${INFER_PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\n` +
    `authorization: Bearer ${BENCH_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(INFER_REQUEST)}\r\n\r\n`;
  const bytes = Buffer.from(head + INFER_REQUEST);
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(port, '127.0.0.1');
    let pending = '';
    let left = count;
    socket.setNoDelay(true);
    socket.setEncoding('latin1');
    socket.on('connect', () => socket.write(bytes));
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      pending += chunk;
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!pending.startsWith('HTTP/1.1 200')) {
          reject(new Error(`unexpected answer: ${pending.slice(0, 80)}`));
          socket.destroy();
          return;
        }
        const length = /\r\ncontent-length: *(\d+)/i.exec(pending.slice(0, end));
        if (length === null) {
          reject(new Error('an answer without content-length'));
          socket.destroy();
          return;
        }
        const total = end + 4 + Number(length[1]);
        if (pending.length < total) return;
        pending = pending.slice(total);
        left -= 1;
        if (left === 0) {
          socket.end();
          resolve();
          return;
        }
        socket.write(bytes);
      }
    });
  });
}

async function main(): Promise<void> {
  installCleanup();
  const dir = tmpdir();
  const name = `sluice-sequential-${process.pid}.cpuprofile`;
  const children: Child[] = [];
  let line = '';
  let window: [number, number] = [0, 0];
  try {
    const replica = await startChild('replica', script('replica'));
    children.push(replica);
    const gateway = await startChild('gateway', script('gateway'), {
      env: { BENCH_REPLICA_URL: `http://127.0.0.1:${replica.port}`, BENCH_LOG_LEVEL: logLevel },
      execArgv: ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}`],
      stdout: openSync('/dev/null', 'w'),
    });
    children.push(gateway);
    await sequential(gateway.port, Math.min(2_000, requests)); // warm-up
    const cpu0 = cpuSeconds(gateway.pid);
    const from = Number(process.hrtime.bigint() / 1000n);
    const started = performance.now();
    await sequential(gateway.port, requests);
    const wallMs = performance.now() - started;
    window = [from, Number(process.hrtime.bigint() / 1000n)];
    const cpu1 = cpuSeconds(gateway.pid);
    const cpuUs = cpu0 === undefined || cpu1 === undefined ? Number.NaN : ((cpu1 - cpu0) * 1e6) / requests;
    line = `${requests} sequential requests, log level ${logLevel}: ${((wallMs * 1000) / requests).toFixed(1)} µs wall per request, gateway CPU ${cpuUs.toFixed(1)} µs per request (under the profiler)`;
  } finally {
    await Promise.all(children.map((c) => c.stop(15_000)));
  }
  const summary = summarizeProfile(readProfile(join(dir, name)), top, window[0], window[1]);
  process.stdout.write(`${line}\n\n${formatSummary(summary)}\n\nprofile: ${join(dir, name)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`sequential-profile: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
