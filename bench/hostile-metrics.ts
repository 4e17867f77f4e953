// `node dist/bench/hostile-metrics.js` (after a build): what a replica with a huge Prometheus
// endpoint costs everything else. The gateway (`sluice serve`, `workers: 2`, an admin listener) in
// a child process, with two services:
//   hot    two replicas read with `load: { preset: vllm }` every 250 ms: one whose /metrics is one
//          line of 7.5 MiB (the hostile run) or a small exposition (the quiet baseline), and a
//          healthy one with a small exposition
//   quiet  one slow replica (20 ms per request), `concurrency: 1`: of two requests sent at once,
//          one waits in the queue and is granted by the control plane when the other ends
// Measured over the window, for the baseline and then the hostile run (fresh processes each):
// the gateway's main thread (the control plane) CPU, from its scheduler counters
// (/proc/<pid>/task/<pid>/schedstat), as a share of one core; the whole process's CPU; /healthz
// latency p50/p90 on the admin listener (one request at a time); the queued request's extra wait
// (its latency minus the two service times); RSS at the start of the window and its highest; and
// the healthy replica's failed readings (`load reading failed` lines naming it).
// Each replica is a child process (bench/hostile-metrics-replica.ts), so serving 7.5 MiB does not
// slow this client.
// Settings:
//   BENCH_HOSTILE_SECONDS  the measured window per run (default 10), after 2 s of warm-up
//   BENCH_HOSTILE_BYTES    the hostile line's size (default 7.5 MiB)
import { request } from 'undici';
import { AUTH, TEST_TOKEN_SHA256 } from '../test/helpers/gateway.js';
import { type GatewayProcess, startGatewayProcess } from '../test/helpers/gateway-process.js';
import { type Child, installCleanup, startChild } from './lib/children.js';
import { cpuSeconds, statusMiB, threadCpu } from './lib/proc.js';
import { intEnv } from './lib/settings.js';
import { percentile } from './lib/stats.js';

const seconds = intEnv('BENCH_HOSTILE_SECONDS', 10, 1, 600);
const hostileBytes = intEnv('BENCH_HOSTILE_BYTES', 7.5 * 1024 * 1024, 1024, 64 * 1024 * 1024);
const SERVICE_MS = 20;
const REPLICA = new URL('./hostile-metrics-replica.js', import.meta.url);

interface RunResult {
  run: string;
  controlPlaneCorePct: number;
  processCorePct: number;
  healthzP50Ms: number;
  healthzP90Ms: number;
  healthzN: number;
  queuedExtraP50Ms: number;
  queuedExtraP90Ms: number;
  queuedN: number;
  rssStartMiB: number;
  rssMaxMiB: number;
  healthyFailures: number;
  hostileProblem: string;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function replica(name: string, mode: string, env: Record<string, string> = {}): Promise<Child> {
  return startChild(name, REPLICA, { env: { BENCH_REPLICA_MODE: mode, BENCH_REPLICA_BYTES: String(hostileBytes), ...env } });
}

async function timed(url: string, init: Parameters<typeof request>[1] = {}): Promise<number> {
  const t0 = performance.now();
  const res = await request(url, init);
  await res.body.dump();
  if (res.statusCode !== 200) throw new Error(`${url}: status ${res.statusCode}`);
  return performance.now() - t0;
}

async function measure(run: 'baseline' | 'hostile'): Promise<RunResult> {
  const children = [await replica('hot', run === 'hostile' ? 'line' : 'small'), await replica('healthy', 'small'), await replica('quiet', 'small', { BENCH_REPLICA_DELAY_MS: String(SERVICE_MS) })];
  const [hot, healthy, quiet] = children.map((c) => `http://127.0.0.1:${c.port}`);
  const tokens = [{ name: 'bench', sha256: TEST_TOKEN_SHA256 }];
  let gw: GatewayProcess | undefined;
  try {
    gw = await startGatewayProcess(
      {
        workers: 2,
        log: { level: 'info' },
        services: [
          { slug: 'hot', tokens, replicas: { urls: [hot, healthy], load: { preset: 'vllm', intervalMs: 250 } } },
          { slug: 'quiet', tokens, replicas: { urls: [quiet], concurrency: 1 } },
        ],
      },
      { admin: true },
    );
    const g = gw;
    const healthz = `http://127.0.0.1:${g.adminPort}/healthz`;
    const quietUrl = `${g.base('quiet')}/v1/chat/completions`;
    const post = { method: 'POST' as const, headers: { ...AUTH, 'content-type': 'application/json' }, body: '{}' };
    await sleep(2_000);

    const mainCpu = (): number => threadCpu(g.pid).get(g.pid) ?? Number.NaN;
    const cpu0 = mainCpu();
    const proc0 = cpuSeconds(g.pid) ?? Number.NaN;
    const rssStart = statusMiB(g.pid, 'VmRSS') ?? Number.NaN;
    let rssMax = rssStart;
    const t0 = performance.now();
    const end = t0 + seconds * 1000;
    const healthzMs: number[] = [];
    const queuedExtraMs: number[] = [];
    const rssTimer = setInterval(() => (rssMax = Math.max(rssMax, statusMiB(g.pid, 'VmRSS') ?? 0)), 250);
    await Promise.all([
      (async () => {
        while (performance.now() < end) {
          healthzMs.push(await timed(healthz));
          await sleep(20);
        }
      })(),
      (async () => {
        while (performance.now() < end) {
          // One takes the slot, the other waits for it in the queue.
          const [a, b] = await Promise.all([timed(quietUrl, post), timed(quietUrl, post)]);
          queuedExtraMs.push(Math.max(a, b) - 2 * SERVICE_MS);
          await sleep(20);
        }
      })(),
    ]);
    clearInterval(rssTimer);
    const elapsedS = (performance.now() - t0) / 1000;
    const cpu = mainCpu() - cpu0;
    const proc = (cpuSeconds(g.pid) ?? Number.NaN) - proc0;
    const lines = g
      .output()
      .split('\n')
      .filter((l) => l.includes('load reading failed'))
      .map((l) => JSON.parse(l) as { replica: string; problem: string });
    return {
      run,
      controlPlaneCorePct: (100 * cpu) / elapsedS,
      processCorePct: (100 * proc) / elapsedS,
      healthzP50Ms: percentile(healthzMs, 50),
      healthzP90Ms: percentile(healthzMs, 90),
      healthzN: healthzMs.length,
      queuedExtraP50Ms: percentile(queuedExtraMs, 50),
      queuedExtraP90Ms: percentile(queuedExtraMs, 90),
      queuedN: queuedExtraMs.length,
      rssStartMiB: rssStart,
      rssMaxMiB: rssMax,
      healthyFailures: lines.filter((l) => l.replica === 'hot-2').length,
      hostileProblem: lines.find((l) => l.replica === 'hot-1')?.problem ?? '-',
    };
  } finally {
    await gw?.stop();
    for (const c of children) await c.stop();
  }
}

installCleanup();
const results = [await measure('baseline'), await measure('hostile')];
const f = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const [base, hostile] = results as [RunResult, RunResult];
process.stdout.write(
  [
    `hostile /metrics: one line of ${(hostileBytes / 1048576).toFixed(2)} MiB, read every 250 ms; ${seconds} s window per run`,
    '',
    '| run | control plane CPU (% of a core) | process CPU (%) | /healthz p50 / p90 (ms) | queued extra wait p50 / p90 (ms) | RSS start / max (MiB) | healthy replica failures | hostile reading |',
    '|---|---|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.run} | ${f(r.controlPlaneCorePct)} | ${f(r.processCorePct)} | ${f(r.healthzP50Ms)} / ${f(r.healthzP90Ms)} (n ${r.healthzN}) | ${f(r.queuedExtraP50Ms)} / ${f(r.queuedExtraP90Ms)} (n ${r.queuedN}) | ${f(r.rssStartMiB, 0)} / ${f(r.rssMaxMiB, 0)} | ${r.healthyFailures} | ${r.hostileProblem} |`,
    ),
    '',
    `hostile − baseline: control plane ${f(hostile.controlPlaneCorePct - base.controlPlaneCorePct)} points of a core; /healthz p90 ${f(hostile.healthzP90Ms - base.healthzP90Ms)} ms; queued extra wait p90 ${f(hostile.queuedExtraP90Ms - base.queuedExtraP90Ms)} ms; RSS max ${f(hostile.rssMaxMiB - base.rssMaxMiB, 0)} MiB`,
    JSON.stringify(results),
    '',
  ].join('\n'),
);
