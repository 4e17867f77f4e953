// `node dist/bench/profile.js` (after `npm run build`): the real gateway under `node --cpu-prof`,
// relaying autocannon's load to the benchmark replica, then where its CPU time went.
// It starts its own replica and gateway (child processes), loads the gateway after a warm-up,
// stops it (the profile is written on exit), and prints the top self-time functions and the
// share of each part of the stack, counting only the samples taken while the load ran.
// Settings:
//   BENCH_PROFILE_DURATION_S  load duration (default 10)
//   BENCH_WARMUP_S            unprofiled-in-the-summary warm-up first (default 2)
//   BENCH_CONNECTIONS         autocannon connections (default 50)
//   BENCH_LOG_LEVEL           the gateway's log level (default warn; `info` logs every request)
//   BENCH_PROFILE_WORKLOAD    json (POST small JSON, default) | sse (20 tokens per answer, no gap)
//                             | tokens (long streams from the batching replica: the per-token path)
//                             | newStreams (streams each on a new connection, scenario 3c: the
//                               per-stream setup; the duration is each stream's life)
//   BENCH_PROFILE_STREAMS     tokens: concurrent streams; newStreams: streams in all (default 1000)
//   BENCH_PROFILE_GAP_MS      tokens: ms between the batch clock's ticks; newStreams: between a
//                             stream's tokens (default 100)
//   BENCH_PROFILE_TOP         how many functions to list (default 15)
//   BENCH_PROFILE_DIR         where the .cpuprofile goes (default .bench-results/profiles)
//   BENCH_PROFILE_TARGET      gateway (default) | bare: profile the bare uWS + net.Socket relay
//                             instead, to see which costs are the stack's and which are Sluice's
import autocannon from 'autocannon';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { formatSummary, readProfile, summarizeProfile } from './cpuprofile.js';
import { type Child, installCleanup, startChild } from './lib/children.js';
import { measureStreams, type Target } from './lib/client.js';
import { newStreams } from './lib/new-streams.js';
import { cpuSeconds, cpuTimes, statusMiB, threadCpu } from './lib/proc.js';
import { choiceEnv, intEnv } from './lib/settings.js';
import { BENCH_SLUG, BENCH_TOKEN, INFER_PATH, INFER_REQUEST, STREAM_PATH } from './lib/workload.js';

const durationS = intEnv('BENCH_PROFILE_DURATION_S', 10, 1, 3_600);
const warmupS = intEnv('BENCH_WARMUP_S', 2, 0, 600);
const connections = intEnv('BENCH_CONNECTIONS', 50, 1, 10_000);
const top = intEnv('BENCH_PROFILE_TOP', 15, 1, 1_000);
const logLevel = choiceEnv('BENCH_LOG_LEVEL', 'warn', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const);
const workload = choiceEnv('BENCH_PROFILE_WORKLOAD', 'json', ['json', 'sse', 'tokens', 'newStreams'] as const);
const streams = intEnv('BENCH_PROFILE_STREAMS', 1_000, 1, 10_000);
const gapMs = intEnv('BENCH_PROFILE_GAP_MS', 100, 1, 60_000);
const target = choiceEnv('BENCH_PROFILE_TARGET', 'gateway', ['gateway', 'bare'] as const);
const dir = resolve(process.env['BENCH_PROFILE_DIR'] || join('.bench-results', 'profiles'));

/** A thread's name (`/proc/<pid>/task/<tid>/comm`: libuv's pool, V8's workers, a Worker), or its id. */
function threadName(pid: number, tid: number): string {
  try {
    return `${readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim()}(${tid})`;
  } catch {
    return String(tid);
  }
}

const script = (name: string): URL => new URL(`./${name}.js`, import.meta.url);

async function main(): Promise<void> {
  installCleanup();
  mkdirSync(dir, { recursive: true });
  const name = `${target === 'gateway' ? `gateway-${logLevel}` : 'bare'}-${workload}-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`;
  const file = join(dir, name);
  const children: Child[] = [];
  let window: [number, number] = [0, 0];
  let stats = '';
  try {
    const replica = await startChild('replica', script('replica'));
    children.push(replica);
    const measured = await startChild(target, script(target === 'gateway' ? 'gateway' : 'bare-relay'), {
      env: { BENCH_REPLICA_URL: `http://127.0.0.1:${replica.port}`, BENCH_LOG_LEVEL: logLevel },
      execArgv: ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}`],
    });
    children.push(measured);
    if (workload === 'newStreams') {
      const t: Target = { origin: `http://127.0.0.1:${measured.port}`, prefix: `/api/v1/services/${BENCH_SLUG}/request`, headers: { authorization: `Bearer ${BENCH_TOKEN}` } };
      const tokens = Math.max(1, Math.round((durationS * 1000) / gapMs));
      if (warmupS > 0) {
        process.stderr.write(`profile: warm-up ${warmupS} s\n`);
        await newStreams(t, undefined, streams, Math.max(1, Math.round((warmupS * 1000) / gapMs)), gapMs);
      }
      process.stderr.write(`profile: gateway, ${streams} new streams × ${tokens} tokens, ${gapMs} ms apart, log level ${logLevel}\n`);
      const threads0 = threadCpu(measured.pid);
      const from = Number(process.hrtime.bigint() / 1000n);
      const r = await newStreams(t, measured.pid, streams, tokens, gapMs);
      window = [from, Number(process.hrtime.bigint() / 1000n)];
      const threads1 = threadCpu(measured.pid);
      const perThread = [...threads1]
        .map(([tid, s1]) => ({ tid, s: s1 - (threads0.get(tid) ?? 0) }))
        .filter((x) => x.s > 0)
        .sort((a, b) => b.s - a.s)
        .map((x) => `${x.tid === measured.pid ? 'main' : threadName(measured.pid, x.tid)} ${((x.s * 1e6) / streams).toFixed(1)}`)
        .join(', ');
      stats = `gateway under --cpu-prof: ${r.completed}/${r.streams} streams, ${r.tokens} tokens; CPU ${r.relayCpuUsPerStream?.toFixed(1)} µs/stream (user ${r.relayUserUsPerStream?.toFixed(1)}, system ${r.relaySysUsPerStream?.toFixed(1)}; per thread, µs/stream: ${perThread})\n(the profiler itself costs some CPU; compare peers with npm run bench, not here)`;
    } else if (workload === 'tokens') {
      const t: Target =
        target === 'gateway'
          ? { origin: `http://127.0.0.1:${measured.port}`, prefix: `/api/v1/services/${BENCH_SLUG}/request`, headers: { authorization: `Bearer ${BENCH_TOKEN}` } }
          : { origin: `http://127.0.0.1:${measured.port}`, prefix: '', headers: {} };
      if (warmupS > 0) {
        process.stderr.write(`profile: warm-up ${warmupS} s\n`);
        await measureStreams(t, streams, Math.max(2, Math.round((warmupS * 1000) / gapMs)), gapMs);
      }
      const tokens = Math.max(2, Math.round((durationS * 1000) / gapMs));
      process.stderr.write(`profile: ${target}, ${streams} streams × ${tokens} tokens, a tick every ${gapMs} ms${target === 'gateway' ? `, log level ${logLevel}` : ''}\n`);
      const cpu0 = cpuTimes(measured.pid);
      const threads0 = threadCpu(measured.pid);
      const from = Number(process.hrtime.bigint() / 1000n);
      const timings = await measureStreams(t, streams, tokens, gapMs);
      window = [from, Number(process.hrtime.bigint() / 1000n)];
      const cpu1 = cpuTimes(measured.pid);
      const threads1 = threadCpu(measured.pid);
      const delivered = timings.reduce((n, x) => n + x.tokens, 0);
      const onCpu = cpu0?.onCpuS === undefined || cpu1?.onCpuS === undefined ? Number.NaN : cpu1.onCpuS - cpu0.onCpuS;
      const perThread = [...threads1]
        .map(([tid, s1]) => ({ tid, s: s1 - (threads0.get(tid) ?? 0) }))
        .filter((x) => x.s > 0)
        .sort((a, b) => b.s - a.s)
        .map((x) => `${x.tid === measured.pid ? 'main' : x.tid} ${((x.s * 1e6) / delivered).toFixed(1)}`)
        .join(', ');
      stats =
        `${target} under --cpu-prof: ${delivered} tokens; ${target} CPU ${((onCpu * 1e6) / delivered).toFixed(1)} µs/token ` +
        `(per thread, µs/token: ${perThread}); RSS ${statusMiB(measured.pid, 'VmRSS')?.toFixed(1)} MiB\n(the profiler itself costs some CPU; compare peers with npm run bench, not here)`;
    } else {
      const path = workload === 'json' ? INFER_PATH : `${STREAM_PATH}?tokens=20&gap_ms=0`;
      const load = (duration: number) =>
        autocannon({
          url: `http://127.0.0.1:${measured.port}${target === 'gateway' ? `/api/v1/services/${BENCH_SLUG}/request` : ''}${path}`,
          method: 'POST',
          headers: { authorization: `Bearer ${BENCH_TOKEN}`, 'content-type': 'application/json' },
          body: INFER_REQUEST,
          connections,
          duration,
          pipelining: 1,
        });
      if (warmupS > 0) {
        process.stderr.write(`profile: warm-up ${warmupS} s\n`);
        await load(warmupS);
      }
      process.stderr.write(`profile: ${target}, ${workload} load, ${connections} connections × ${durationS} s${target === 'gateway' ? `, log level ${logLevel}` : ''}\n`);
      const cpu0 = cpuSeconds(measured.pid);
      const from = Number(process.hrtime.bigint() / 1000n);
      const r = await load(durationS);
      window = [from, Number(process.hrtime.bigint() / 1000n)];
      const cpu1 = cpuSeconds(measured.pid);
      const cpuS = cpu0 === undefined || cpu1 === undefined ? Number.NaN : cpu1 - cpu0;
      const requests = Object.values(r.statusCodeStats).reduce((n, v) => n + Number(v.count), 0);
      stats =
        `${target} under --cpu-prof: ${Math.round(r.requests.mean)} req/s (mean of per-second samples), latency p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, ` +
        `errors ${r.errors + r.non2xx}; ${target} CPU ${((cpuS / r.duration) * 100).toFixed(0)}% of a core, ${((cpuS * 1e6) / requests).toFixed(1)} µs/request; ` +
        `RSS ${statusMiB(measured.pid, 'VmRSS')?.toFixed(1)} MiB\n(the profiler itself costs some throughput; compare peers with npm run bench, not here)`;
    }
  } finally {
    await Promise.all(children.map((c) => c.stop(15_000)));
  }
  const summary = summarizeProfile(readProfile(file), top, window[0], window[1]);
  process.stdout.write(`\n${stats}\n\n${formatSummary(summary)}\n\nprofile: ${file}\n(open it in Chrome DevTools › Performance, or https://www.speedscope.app)\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`profile: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
