// One measurement of one scenario on one peer. run.ts decides the order and the rounds.
import autocannon, { type Result } from 'autocannon';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { recordProcess } from './children.js';
import { measureStreams, measureTtfb } from './client.js';
import type { Settings } from './modes.js';
import { type Peer, sluiceTarget, startSluice } from './peers.js';
import { cpuTimes, statusMiB } from './proc.js';
import { openIdleStreams, slowRead } from './raw-client.js';
import { percentile } from './stats.js';
import { BLOB_PATH, IDLE_PATH, INFER_ANSWER, INFER_PATH, INFER_REQUEST } from './workload.js';

export interface ThroughputRun {
  reqPerS: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  requests: number;
  errors: number;
  /** CPU the relay process used during the run (user + system, every thread), per request. */
  relayCpuUsPerReq: number | null;
  /** The user-space part of it (the relay's own code; system time is mostly the socket calls). */
  relayUserUsPerReq: number | null;
  /** The system (kernel) part of it. */
  relaySysUsPerReq: number | null;
  /** The relay's CPU during the run, in % of one core. */
  relayCpuPct: number | null;
}

export interface TtfbRun {
  p50Us: number;
  p90Us: number;
  p99Us: number;
  p999Us: number;
}

export interface TokensRun {
  streams: number;
  /** Tokens delivered. */
  tokens: number;
  /** Streams that ended before their last token (the relay cut them). */
  incompleteStreams: number;
  /** Tokens whose delivery is counted: those written once every stream had started. */
  measuredTokens: number;
  deliveryP50Us: number;
  deliveryP90Us: number;
  deliveryP99Us: number;
  /** CPU the relay process used during the run, per token delivered. */
  relayCpuUsPerToken: number | null;
  /** Its user-space and system (kernel) parts. */
  relayUserUsPerToken: number | null;
  relaySysUsPerToken: number | null;
}

export interface SlowReaderRun {
  bytes: number;
  seconds: number;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  growthMiB: number;
}

export interface IdleStreamsRun {
  streams: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
  perStreamKiB: number;
}

export interface ColdStartRun {
  requests: number;
  ok: number;
  lost: number;
  statuses: Record<string, number>;
  /**
   * The replica answered its first readiness probe → the first queued request reached it: the
   * first connection it accepted after that answer, or the first request it read if that came
   * sooner (on a connection already open). Replica's clock.
   */
  readyToFirstRequestMs: number | null;
  /** The same, to the first request the replica read (includes accepting the burst's connections). */
  readyToFirstRequestReadMs: number | null;
  /** Client sent the burst → the last answer arrived. */
  burstMs: number;
}

function load(peer: Peer, connections: number, durationS: number): Promise<Result> {
  return autocannon({
    url: peer.target.origin + peer.target.prefix + INFER_PATH,
    method: 'POST',
    headers: { ...peer.target.headers, 'content-type': 'application/json' },
    body: INFER_REQUEST,
    connections,
    duration: durationS,
    pipelining: 1,
    timeout: 10,
  });
}

export async function warmUp(peer: Peer, s: Settings): Promise<void> {
  if (s.warmupS > 0) await load(peer, s.connections, s.warmupS);
}

export async function throughput(peer: Peer, s: Settings): Promise<ThroughputRun> {
  const pid = peer.relay?.pid;
  const cpu0 = pid === undefined ? undefined : cpuTimes(pid);
  const r = await load(peer, s.connections, s.durationS);
  const cpu1 = pid === undefined ? undefined : cpuTimes(pid);
  const requests = Object.values(r.statusCodeStats).reduce((n, v) => n + Number(v.count), 0);
  const userS = cpu0 === undefined || cpu1 === undefined ? undefined : cpu1.user - cpu0.user;
  const sysS = cpu0 === undefined || cpu1 === undefined ? undefined : cpu1.system - cpu0.system;
  const cpuS = userS === undefined || sysS === undefined ? undefined : userS + sysS;
  const perRequest = (seconds: number | undefined): number | null => (seconds === undefined || requests === 0 ? null : (seconds * 1e6) / requests);
  return {
    reqPerS: r.requests.mean,
    latencyP50Ms: r.latency.p50,
    latencyP99Ms: r.latency.p99,
    requests,
    errors: r.errors + r.non2xx,
    relayCpuUsPerReq: perRequest(cpuS),
    relayUserUsPerReq: perRequest(userS),
    relaySysUsPerReq: perRequest(sysS),
    relayCpuPct: cpuS === undefined ? null : (cpuS / r.duration) * 100,
  };
}

export async function ttfb(peer: Peer, s: Settings): Promise<TtfbRun> {
  const samples = await measureTtfb(peer.target, INFER_PATH, INFER_REQUEST, s.ttfbRequests);
  return { p50Us: percentile(samples, 50), p90Us: percentile(samples, 90), p99Us: percentile(samples, 99), p999Us: percentile(samples, 99.9) };
}

/** `tokens`: s.streams streams; `tokensFew`: s.fewStreams, faster. */
export async function tokens(peer: Peer, s: Settings, few = false): Promise<TokensRun> {
  const pid = peer.relay?.pid;
  const expected = few ? s.fewStreamTokens : s.streamTokens;
  const cpu0 = pid === undefined ? undefined : cpuTimes(pid);
  const streams = few
    ? await measureStreams(peer.target, s.fewStreams, s.fewStreamTokens, s.fewStreamGapMs)
    : await measureStreams(peer.target, s.streams, s.streamTokens, s.streamGapMs);
  const cpu1 = pid === undefined ? undefined : cpuTimes(pid);
  const delivered = streams.reduce((n, t) => n + t.tokens, 0);
  const perToken = (seconds: number | undefined): number | null => (seconds === undefined || delivered === 0 ? null : (seconds * 1e6) / delivered);
  // A run of a few thousand tokens is a few clock ticks of CPU: the total comes from the
  // scheduler's nanosecond counters when the kernel keeps them, split by the ticks' proportions.
  const tickUser = cpu0 === undefined || cpu1 === undefined ? undefined : cpu1.user - cpu0.user;
  const tickSys = cpu0 === undefined || cpu1 === undefined ? undefined : cpu1.system - cpu0.system;
  const onCpu = cpu0?.onCpuS === undefined || cpu1?.onCpuS === undefined ? undefined : cpu1.onCpuS - cpu0.onCpuS;
  let userS = tickUser;
  let sysS = tickSys;
  if (onCpu !== undefined && tickUser !== undefined && tickSys !== undefined) {
    const ticks = tickUser + tickSys;
    userS = ticks > 0 ? (onCpu * tickUser) / ticks : onCpu / 2;
    sysS = onCpu - userS;
  }
  const steady = streams.flatMap((t) => t.steadyDeliveryUs);
  // A run too short to have tokens after the last stream started (smoke) reports every token.
  const delivery = steady.length > 0 ? steady : streams.flatMap((t) => t.deliveryUs);
  return {
    streams: streams.length,
    tokens: delivered,
    incompleteStreams: streams.filter((t) => t.tokens !== expected).length,
    measuredTokens: delivery.length,
    deliveryP50Us: percentile(delivery, 50),
    deliveryP90Us: percentile(delivery, 90),
    deliveryP99Us: percentile(delivery, 99),
    relayCpuUsPerToken: perToken(userS === undefined || sysS === undefined ? undefined : userS + sysS),
    relayUserUsPerToken: perToken(userS),
    relaySysUsPerToken: perToken(sysS),
  };
}

/**
 * Readies a freshly started relay for a memory measurement: some load and a few idle streams
 * opened and closed, so code is compiled and pools exist before the baseline is taken (what
 * remains measured is what the scenario holds, not a process warming up).
 */
export async function primeForMemory(peer: Peer, s: Settings): Promise<void> {
  await measureTtfb(peer.target, INFER_PATH, INFER_REQUEST, 500, 10);
  const close = await openIdleStreams(peer.target, IDLE_PATH, Math.min(100, s.idleStreams));
  close();
  await sleep(500);
}

const rss = (pid: number): number => statusMiB(pid, 'VmRSS') ?? Number.NaN;

export async function slowReader(peer: Peer, s: Settings): Promise<SlowReaderRun> {
  const pid = peer.relay!.pid;
  await sleep(200);
  const before = rss(pid);
  let peak = before;
  const sample = (): void => {
    peak = Math.max(peak, rss(pid));
  };
  const r = await slowRead(peer.target, `${BLOB_PATH}?bytes=${s.slowBytes}`, s.slowBytes, s.slowRateBytesPerS, sample);
  sample();
  return { bytes: r.bytes, seconds: r.seconds, rssBeforeMiB: before, rssPeakMiB: peak, growthMiB: peak - before };
}

export async function idleStreams(peer: Peer, s: Settings): Promise<IdleStreamsRun> {
  const pid = peer.relay!.pid;
  await sleep(200);
  const before = rss(pid);
  const close = await openIdleStreams(peer.target, IDLE_PATH, s.idleStreams);
  try {
    await sleep(500);
    const after = rss(pid);
    return { streams: s.idleStreams, rssBeforeMiB: before, rssAfterMiB: after, perStreamKiB: ((after - before) * 1024) / s.idleStreams };
  } finally {
    close();
    await sleep(200);
  }
}

/**
 * A fresh Sluice (log level info) whose service's replica it launches on demand: `coldRequests`
 * POSTs at once to the cold service, each on its own connection.
 */
export async function coldStart(s: Settings): Promise<ColdStartRun> {
  const statsFile = join(tmpdir(), `sluice-bench-${process.pid}-cold.json`);
  rmSync(statsFile, { force: true });
  const gateway = await startSluice('sluice-cold', {
    BENCH_COLD_STATS: statsFile,
    BENCH_REPLICA_STARTUP_MS: String(s.coldStartupMs),
    BENCH_LOG_LEVEL: 'info',
    BENCH_WORKERS: '1',
    BENCH_OPTIONS: 'on',
  });
  try {
    const target = sluiceTarget(gateway.port);
    const pool = new Pool(target.origin, { connections: s.coldRequests, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
    const statuses: Record<string, number> = {};
    let ok = 0;
    const t0 = performance.now();
    try {
      await Promise.all(
        Array.from({ length: s.coldRequests }, async () => {
          let key: string;
          try {
            const res = await pool.request({
              method: 'POST',
              path: target.prefix + INFER_PATH,
              headers: { ...target.headers, 'content-type': 'application/json' },
              body: INFER_REQUEST,
            });
            const body = await res.body.text();
            key = String(res.statusCode);
            if (res.statusCode === 200 && body === INFER_ANSWER) ok += 1;
            else if (res.statusCode === 200) key = '200 (wrong body)';
          } catch (err) {
            key = (err as { code?: string }).code ?? 'error';
          }
          statuses[key] = (statuses[key] ?? 0) + 1;
        }),
      );
    } finally {
      await pool.close();
    }
    const burstMs = performance.now() - t0;
    let readyToFirstRequestMs: number | null = null;
    let readyToFirstRequestReadMs: number | null = null;
    try {
      const stats = JSON.parse(readFileSync(statsFile, 'utf8')) as { pid: number; readyAnsweredUs: number; firstConnectionUs: number; firstRequestUs: number };
      recordProcess('cold replica (launched by sluice-cold)', stats.pid);
      if (stats.readyAnsweredUs > 0) {
        const arrived = stats.firstConnectionUs > 0 ? Math.min(stats.firstConnectionUs, stats.firstRequestUs) : stats.firstRequestUs;
        readyToFirstRequestMs = (arrived - stats.readyAnsweredUs) / 1000;
        readyToFirstRequestReadMs = (stats.firstRequestUs - stats.readyAnsweredUs) / 1000;
      }
    } catch {
      // no request reached the replica
    }
    return { requests: s.coldRequests, ok, lost: s.coldRequests - ok, statuses, readyToFirstRequestMs, readyToFirstRequestReadMs, burstMs };
  } finally {
    await gateway.stop(15_000);
    rmSync(statsFile, { force: true });
  }
}
