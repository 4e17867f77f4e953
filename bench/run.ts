// `npm run bench`: Sluice side by side with its peers, in one run, on this machine.
//
// Peers, each its own process on its own port (the load generator, in this process, never shares
// a thread with what it measures):
//   direct        the replica itself (bench/replica.ts, node:http)
//   sluice        the real gateway (bench/gateway.ts) at BENCH_LOG_LEVEL (default warn)
//   sluice-info   the real gateway at `info`: one access-log line per request, as in production
//   bare          uWS + undici and nothing else (bench/bare-relay.ts): the stack's upper bound
// Phases, each repeated BENCH_ROUNDS times with the peers interleaved (the starting peer rotates
// every round); every figure reported is the median across rounds:
//   throughput    autocannon, POST small JSON, closed loop
//   ttfb          our own undici client: request sent → first body byte, sequential and concurrent
//   sse           time to first token, gaps between tokens, and per-token delivery time
// Plus the relays' RSS before and after load, and the CPU each process used per request.
// Settings: see bench/README.md. Results: a table on stdout, everything in .bench-results/<ts>.json.
import autocannon, { type Result } from 'autocannon';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { atExit, type Child, installCleanup, startChild } from './lib/children.js';
import { fetchOnce, measureStreams, measureTtfb, type Target } from './lib/client.js';
import { cpuSeconds, statusMiB } from './lib/proc.js';
import { choiceEnv, intEnv, listEnv } from './lib/settings.js';
import { median, percentile } from './lib/stats.js';
import { BENCH_SLUG, BENCH_TOKEN, INFER_ANSWER, INFER_PATH, INFER_REQUEST } from './lib/workload.js';

// ── settings ─────────────────────────────────────────────────────────────────────────────────

const PEERS = ['direct', 'sluice', 'sluice-info', 'bare'] as const;
type PeerName = (typeof PEERS)[number];
const PHASES = ['throughput', 'ttfb', 'sse'] as const;
type Phase = (typeof PHASES)[number];

const S = {
  connections: intEnv('BENCH_CONNECTIONS', 50, 1, 10_000),
  durationS: intEnv('BENCH_DURATION_S', 10, 1, 3_600),
  warmupS: intEnv('BENCH_WARMUP_S', 2, 0, 600),
  rounds: intEnv('BENCH_ROUNDS', 3, 1, 100),
  ttfbRequests: intEnv('BENCH_TTFB_REQUESTS', 500, 1, 1_000_000),
  ttfbConcurrency: intEnv('BENCH_TTFB_CONCURRENCY', 8, 1, 1_000),
  sseStreams: intEnv('BENCH_SSE_STREAMS', 8, 1, 10_000),
  sseConcurrency: intEnv('BENCH_SSE_CONCURRENCY', 4, 1, 1_000),
  sseTokens: intEnv('BENCH_SSE_TOKENS', 20, 2, 100_000),
  sseGapMs: intEnv('BENCH_SSE_GAP_MS', 10, 0, 60_000),
  logLevel: choiceEnv('BENCH_LOG_LEVEL', 'warn', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
  peers: listEnv<PeerName>('BENCH_PEERS', PEERS, PEERS),
  phases: listEnv<Phase>('BENCH_PHASES', PHASES, PHASES),
  keepLogs: process.env['BENCH_KEEP_LOGS'] === '1',
};

const LOADAVG_AT_START = loadavg();

const LABEL: Record<PeerName, string> = {
  direct: 'direct',
  sluice: `sluice[${S.logLevel}]`,
  'sluice-info': 'sluice[info]',
  bare: 'bare',
};

// ── peers ────────────────────────────────────────────────────────────────────────────────────

interface Peer {
  name: PeerName;
  target: Target;
  /** The relay's process; undefined for direct. */
  relay: Child | undefined;
  logFile: string | undefined;
}

const script = (name: string): URL => new URL(`./${name}.js`, import.meta.url);

async function startPeers(replica: Child): Promise<Peer[]> {
  const replicaUrl = `http://127.0.0.1:${replica.port}`;
  return Promise.all(
    S.peers.map(async (name): Promise<Peer> => {
      if (name === 'direct') return { name, target: { origin: replicaUrl, prefix: '', headers: {} }, relay: undefined, logFile: undefined };
      if (name === 'bare') {
        const relay = await startChild('bare', script('bare-relay'), { env: { BENCH_REPLICA_URL: replicaUrl } });
        return { name, target: { origin: `http://127.0.0.1:${relay.port}`, prefix: '', headers: {} }, relay, logFile: undefined };
      }
      const level = name === 'sluice' ? S.logLevel : 'info';
      const logFile = join(tmpdir(), `sluice-bench-${process.pid}-${name}.log`);
      const fd = openSync(logFile, 'w');
      if (!S.keepLogs) atExit(() => rmSync(logFile, { force: true }));
      try {
        const relay = await startChild(name, script('gateway'), {
          env: { BENCH_REPLICA_URL: replicaUrl, BENCH_LOG_LEVEL: level },
          stdout: fd,
        });
        return {
          name,
          target: {
            origin: `http://127.0.0.1:${relay.port}`,
            prefix: `/api/v1/services/${BENCH_SLUG}/request`,
            headers: { authorization: `Bearer ${BENCH_TOKEN}` },
          },
          relay,
          logFile,
        };
      } finally {
        closeSync(fd);
      }
    }),
  );
}

/** Every peer must answer exactly what the replica answers before anything is measured. */
async function sanityCheck(peers: Peer[]): Promise<void> {
  for (const peer of peers) {
    const { status, body } = await fetchOnce(peer.target, INFER_PATH, INFER_REQUEST);
    if (status !== 200 || body !== INFER_ANSWER) {
      throw new Error(`${LABEL[peer.name]} answered ${status} ${JSON.stringify(body.slice(0, 200))}, not the replica's answer`);
    }
  }
}

/** Round r's order: every peer once, starting one further along each round. */
function order(peers: Peer[], round: number): Peer[] {
  const k = round % peers.length;
  return [...peers.slice(k), ...peers.slice(0, k)];
}

// ── throughput ───────────────────────────────────────────────────────────────────────────────

interface LoadRun {
  reqPerSecMean: number;
  reqPerSecP50: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  requests: number;
  errors: number;
  non2xx: number;
  /** CPU seconds used during the run by the relay (undefined for direct), the replica, and this process. */
  relayCpuS: number | undefined;
  replicaCpuS: number | undefined;
  loadCpuS: number;
  durationS: number;
}

function runAutocannon(peer: Peer, durationS: number): Promise<Result> {
  return autocannon({
    url: peer.target.origin + peer.target.prefix + INFER_PATH,
    method: 'POST',
    headers: { ...peer.target.headers, 'content-type': 'application/json' },
    body: INFER_REQUEST,
    connections: S.connections,
    duration: durationS,
    pipelining: 1,
    timeout: 10,
  });
}

async function measureLoad(peer: Peer, replica: Child): Promise<LoadRun> {
  const relayPid = peer.relay?.pid;
  const relay0 = relayPid === undefined ? undefined : cpuSeconds(relayPid);
  const replica0 = cpuSeconds(replica.pid);
  const load0 = process.cpuUsage();
  const r = await runAutocannon(peer, S.durationS);
  const load = process.cpuUsage(load0);
  const relay1 = relayPid === undefined ? undefined : cpuSeconds(relayPid);
  const replica1 = cpuSeconds(replica.pid);
  const requests = Object.entries(r.statusCodeStats).reduce((n, [, v]) => n + Number(v.count), 0);
  return {
    reqPerSecMean: r.requests.mean,
    reqPerSecP50: r.requests.p50,
    latencyP50Ms: r.latency.p50,
    latencyP99Ms: r.latency.p99,
    requests,
    errors: r.errors,
    non2xx: r.non2xx,
    relayCpuS: relay0 === undefined || relay1 === undefined ? undefined : relay1 - relay0,
    replicaCpuS: replica0 === undefined || replica1 === undefined ? undefined : replica1 - replica0,
    loadCpuS: (load.user + load.system) / 1e6,
    durationS: r.duration,
  };
}

// ── results ──────────────────────────────────────────────────────────────────────────────────

interface TtfbRun {
  p50Us: number;
  p90Us: number;
  p99Us: number;
}
interface SseRun {
  ttftP50Us: number;
  ttftP90Us: number;
  firstDeliveryP50Us: number;
  gapP50Us: number;
  gapP99Us: number;
  deliveryP50Us: number;
  deliveryP90Us: number;
  deliveryP99Us: number;
}
interface PeerResults {
  load: LoadRun[];
  ttfbSeq: TtfbRun[];
  ttfbConc: TtfbRun[];
  sse: SseRun[];
  memory: { rssBeforeMiB?: number; rssAfterMiB?: number; peakMiB?: number };
  logLines?: number;
  logBytes?: number;
}

function ttfbRun(samples: number[]): TtfbRun {
  return { p50Us: percentile(samples, 50), p90Us: percentile(samples, 90), p99Us: percentile(samples, 99) };
}

/** Median across rounds of one field. */
function med<T>(runs: T[], pick: (run: T) => number | undefined): number {
  return median(runs.map(pick).filter((v): v is number => v !== undefined && Number.isFinite(v)));
}

// ── formatting ───────────────────────────────────────────────────────────────────────────────

const fmt = (v: number, digits = 0): string => (Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–');
const ms = (us: number): string => (Number.isFinite(us) ? `${(us / 1000).toFixed(us < 10_000 ? 3 : 1)}` : '–');
const signed = (v: number, digits = 0): string => (Number.isFinite(v) ? `${v >= 0 ? '+' : ''}${fmt(v, digits)}` : '–');

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function report(peers: Peer[], results: Map<PeerName, PeerResults>): string {
  const out: string[] = [];
  const get = (name: PeerName): PeerResults | undefined => results.get(name);
  const has = (phase: Phase): boolean => S.phases.includes(phase);
  out.push(
    `Sluice bench — node ${process.version}, ${cpus().length} CPUs, load avg ${LOADAVG_AT_START.map((l) => l.toFixed(2)).join(' ')} at start; medians of ${S.rounds} round(s), peers interleaved`,
  );
  if (has('throughput')) {
    out.push('', `Throughput — POST ${INFER_REQUEST.length} B JSON → ${INFER_ANSWER.length} B JSON, autocannon ${S.connections} connections × ${S.durationS} s, pipelining 1; range = (max − min) / median of the rounds' req/s; µs/req = CPU time of that process per request`);
    const rows = peers.map((p) => {
      const r = get(p.name)!.load;
      const reqs = r.map((x) => x.reqPerSecMean);
      const spread = reqs.length > 1 ? ((Math.max(...reqs) - Math.min(...reqs)) / median(reqs)) * 100 : 0;
      const relayCpu = med(r, (x) => x.relayCpuS);
      const replicaCpu = med(r, (x) => x.replicaCpuS);
      const perReq = (cpuS: number): number => (cpuS * 1e6) / med(r, (x) => x.requests);
      return [
        LABEL[p.name],
        fmt(med(r, (x) => x.reqPerSecMean)),
        fmt(med(r, (x) => x.reqPerSecP50)),
        `${spread.toFixed(0)}%`,
        fmt(med(r, (x) => x.latencyP50Ms), 1),
        fmt(med(r, (x) => x.latencyP99Ms), 1),
        p.relay === undefined ? '–' : `${fmt((relayCpu / med(r, (x) => x.durationS)) * 100)}%`,
        p.relay === undefined ? '–' : fmt(perReq(relayCpu), 1),
        fmt(perReq(replicaCpu), 1),
        fmt(perReq(med(r, (x) => x.loadCpuS)), 1),
        String(r.reduce((n, x) => n + x.errors + x.non2xx, 0)),
      ];
    });
    out.push(
      table(['peer', 'req/s mean', 'req/s p50', 'range', 'lat p50 ms', 'lat p99 ms', 'relay CPU', 'relay µs/req', 'replica µs/req', 'client µs/req', 'errors'], rows),
    );
  }
  if (has('ttfb')) {
    out.push('', `Time to first byte — POST small JSON, own undici client; ${S.ttfbRequests} requests sequential (1 connection) and ${S.ttfbConcurrency} concurrent; ms`);
    const rows = peers.map((p) => {
      const r = get(p.name)!;
      return [
        LABEL[p.name],
        ms(med(r.ttfbSeq, (x) => x.p50Us)),
        ms(med(r.ttfbSeq, (x) => x.p90Us)),
        ms(med(r.ttfbSeq, (x) => x.p99Us)),
        ms(med(r.ttfbConc, (x) => x.p50Us)),
        ms(med(r.ttfbConc, (x) => x.p90Us)),
        ms(med(r.ttfbConc, (x) => x.p99Us)),
      ];
    });
    out.push(table(['peer', 'seq p50', 'seq p90', 'seq p99', `c${S.ttfbConcurrency} p50`, `c${S.ttfbConcurrency} p90`, `c${S.ttfbConcurrency} p99`], rows));
  }
  if (has('sse')) {
    out.push(
      '',
      `SSE — ${S.sseStreams} streams (${S.sseConcurrency} at a time) × ${S.sseTokens} tokens, ${S.sseGapMs} ms apart; TTFT includes the replica's ${S.sseGapMs} ms before the first token; delivery = replica wrote the token → client read it; ms`,
    );
    const rows = peers.map((p) => {
      const r = get(p.name)!.sse;
      return [
        LABEL[p.name],
        ms(med(r, (x) => x.ttftP50Us)),
        ms(med(r, (x) => x.ttftP90Us)),
        ms(med(r, (x) => x.firstDeliveryP50Us)),
        ms(med(r, (x) => x.gapP50Us)),
        ms(med(r, (x) => x.gapP99Us)),
        ms(med(r, (x) => x.deliveryP50Us)),
        ms(med(r, (x) => x.deliveryP90Us)),
        ms(med(r, (x) => x.deliveryP99Us)),
      ];
    });
    out.push(table(['peer', 'TTFT p50', 'TTFT p90', '1st deliv p50', 'gap p50', 'gap p99', 'deliv p50', 'deliv p90', 'deliv p99'], rows));
  }
  const relays = peers.filter((p) => p.relay !== undefined);
  if (relays.length > 0) {
    out.push('', 'Relay processes — RSS before load, after load, peak (MiB); log lines written');
    out.push(
      table(
        ['relay', 'RSS before', 'RSS after', 'peak', 'log lines'],
        relays.map((p) => {
          const r = get(p.name)!;
          return [
            LABEL[p.name],
            fmt(r.memory.rssBeforeMiB ?? Number.NaN, 1),
            fmt(r.memory.rssAfterMiB ?? Number.NaN, 1),
            fmt(r.memory.peakMiB ?? Number.NaN, 1),
            r.logLines === undefined ? '–' : fmt(r.logLines),
          ];
        }),
      ),
    );
  }
  out.push('', keyRatios(peers, results));
  return out.join('\n');
}

/**
 * Ratios and differences taken within each round (the peers of one round ran minutes apart at
 * most, so a machine that gets busier or quieter during the run shifts both sides), then the
 * median across rounds, with the per-round values in brackets.
 */
function keyRatios(peers: Peer[], results: Map<PeerName, PeerResults>): string {
  const direct = results.get('direct');
  const bare = results.get('bare');
  const subjects = peers.filter((p) => p.name !== 'direct').map((p) => p.name);
  const has = (phase: Phase): boolean => S.phases.includes(phase);
  const cpuPerReq = (x: LoadRun): number | undefined => (x.relayCpuS === undefined ? undefined : (x.relayCpuS * 1e6) / x.requests);
  type Measure = { label: string; base: PeerResults | undefined; baseName: PeerName; kind: 'ratio' | 'delta'; series: (r: PeerResults) => (number | undefined)[] };
  const measures: Measure[] = [];
  if (has('throughput')) {
    measures.push({ label: 'req/s ÷ direct', base: direct, baseName: 'direct', kind: 'ratio', series: (r) => r.load.map((x) => x.reqPerSecMean) });
    measures.push({ label: 'req/s ÷ bare', base: bare, baseName: 'bare', kind: 'ratio', series: (r) => r.load.map((x) => x.reqPerSecMean) });
    measures.push({ label: 'relay CPU µs/req ÷ bare', base: bare, baseName: 'bare', kind: 'ratio', series: (r) => r.load.map(cpuPerReq) });
  }
  if (has('ttfb')) {
    measures.push({ label: 'added TTFB p50, sequential (µs)', base: direct, baseName: 'direct', kind: 'delta', series: (r) => r.ttfbSeq.map((x) => x.p50Us) });
    measures.push({ label: `added TTFB p50, ${S.ttfbConcurrency} concurrent (µs)`, base: direct, baseName: 'direct', kind: 'delta', series: (r) => r.ttfbConc.map((x) => x.p50Us) });
  }
  if (has('sse')) {
    measures.push({ label: 'added TTFT p50 (µs)', base: direct, baseName: 'direct', kind: 'delta', series: (r) => r.sse.map((x) => x.ttftP50Us) });
    measures.push({ label: 'added first-token delivery p50 (µs)', base: direct, baseName: 'direct', kind: 'delta', series: (r) => r.sse.map((x) => x.firstDeliveryP50Us) });
    measures.push({ label: 'added per-token delivery p50 (µs)', base: direct, baseName: 'direct', kind: 'delta', series: (r) => r.sse.map((x) => x.deliveryP50Us) });
    measures.push({ label: 'token gap p50 − direct (µs)', base: direct, baseName: 'direct', kind: 'delta', series: (r) => r.sse.map((x) => x.gapP50Us) });
  }
  const cell = (m: Measure, name: PeerName): string => {
    const subject = results.get(name);
    if (m.base === undefined || subject === undefined || name === m.baseName) return '–';
    const a = m.series(subject);
    const b = m.series(m.base);
    const perRound: number[] = [];
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const x = a[i];
      const y = b[i];
      if (x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y)) continue;
      if (m.kind === 'ratio') {
        if (y > 0) perRound.push(x / y);
      } else {
        perRound.push(x - y);
      }
    }
    if (perRound.length === 0) return '–';
    const show = (v: number): string => (m.kind === 'ratio' ? v.toFixed(2) : signed(v));
    const mid = show(median(perRound));
    return perRound.length === 1 ? mid : `${mid} [${perRound.map(show).join(' ')}]`;
  };
  const rows = measures.map((m) => [m.label, ...subjects.map((name) => cell(m, name))]);
  return [
    'Key ratios and deltas — taken within each round, then the median across rounds [per-round values]',
    table(['measure', ...subjects.map((name) => LABEL[name])], rows),
  ].join('\n');
}

// ── main ─────────────────────────────────────────────────────────────────────────────────────

function log(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

async function main(): Promise<void> {
  installCleanup();
  const started = Date.now();
  const children: Child[] = [];
  const results = new Map<PeerName, PeerResults>();
  let peers: Peer[] = [];
  try {
    const replica = await startChild('replica', script('replica'));
    children.push(replica);
    peers = await startPeers(replica);
    for (const p of peers) if (p.relay !== undefined) children.push(p.relay);
    log(`replica pid ${replica.pid} :${replica.port}; ${peers.map((p) => `${LABEL[p.name]} ${p.relay === undefined ? '' : `pid ${p.relay.pid} `}:${new URL(p.target.origin).port}`).join(', ')}`);
    await sanityCheck(peers);
    for (const p of peers) {
      results.set(p.name, { load: [], ttfbSeq: [], ttfbConc: [], sse: [], memory: {} });
      if (p.relay !== undefined) results.get(p.name)!.memory.rssBeforeMiB = statusMiB(p.relay.pid, 'VmRSS');
    }

    if (S.phases.includes('throughput') && S.warmupS > 0) {
      for (const p of peers) {
        log(`warm-up ${LABEL[p.name]} ${S.warmupS} s`);
        await runAutocannon(p, S.warmupS);
      }
    }

    for (let round = 0; round < S.rounds; round++) {
      if (S.phases.includes('throughput')) {
        for (const p of order(peers, round)) {
          await sleep(300);
          const run = await measureLoad(p, replica);
          results.get(p.name)!.load.push(run);
          log(`round ${round + 1}/${S.rounds} throughput ${LABEL[p.name]}: ${fmt(run.reqPerSecMean)} req/s, p99 ${run.latencyP99Ms} ms`);
        }
      }
      if (S.phases.includes('ttfb')) {
        for (const p of order(peers, round)) {
          const r = results.get(p.name)!;
          r.ttfbSeq.push(ttfbRun(await measureTtfb(p.target, INFER_PATH, INFER_REQUEST, S.ttfbRequests, 1)));
          r.ttfbConc.push(ttfbRun(await measureTtfb(p.target, INFER_PATH, INFER_REQUEST, S.ttfbRequests, S.ttfbConcurrency)));
        }
        log(`round ${round + 1}/${S.rounds} ttfb done`);
      }
      if (S.phases.includes('sse')) {
        for (const p of order(peers, round)) {
          const streams = await measureStreams(p.target, S.sseStreams, S.sseConcurrency, S.sseTokens, S.sseGapMs);
          const ttft = streams.map((s) => s.ttftUs);
          const gaps = streams.flatMap((s) => s.gapsUs);
          const delivery = streams.flatMap((s) => s.deliveryUs);
          results.get(p.name)!.sse.push({
            ttftP50Us: percentile(ttft, 50),
            ttftP90Us: percentile(ttft, 90),
            firstDeliveryP50Us: percentile(streams.map((s) => s.firstDeliveryUs), 50),
            gapP50Us: percentile(gaps, 50),
            gapP99Us: percentile(gaps, 99),
            deliveryP50Us: percentile(delivery, 50),
            deliveryP90Us: percentile(delivery, 90),
            deliveryP99Us: percentile(delivery, 99),
          });
        }
        log(`round ${round + 1}/${S.rounds} sse done`);
      }
    }

    for (const p of peers) {
      if (p.relay === undefined) continue;
      const memory = results.get(p.name)!.memory;
      memory.rssAfterMiB = statusMiB(p.relay.pid, 'VmRSS');
      memory.peakMiB = statusMiB(p.relay.pid, 'VmHWM');
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    for (const p of peers) {
      if (p.logFile === undefined) continue;
      try {
        const text = readFileSync(p.logFile, 'utf8');
        const r = results.get(p.name);
        if (r !== undefined) {
          r.logLines = text === '' ? 0 : text.split('\n').length - 1;
          r.logBytes = statSync(p.logFile).size;
        }
        if (S.keepLogs) log(`${LABEL[p.name]} log kept: ${p.logFile}`);
        else rmSync(p.logFile, { force: true });
      } catch {
        // no log written
      }
    }
  }

  const text = report(peers, results);
  process.stdout.write(`\n${text}\n`);
  const dir = join(process.cwd(), '.bench-results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${new Date(started).toISOString().replace(/[:.]/g, '-')}.json`);
  const json = {
    startedAt: new Date(started).toISOString(),
    wallSeconds: (Date.now() - started) / 1000,
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    loadavgAtStart: LOADAVG_AT_START,
    loadavgAtEnd: loadavg(),
    settings: S,
    labels: LABEL,
    results: Object.fromEntries(results),
    table: text,
  };
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  process.stdout.write(`\nbench: ${((Date.now() - started) / 1000).toFixed(0)} s; results in ${file}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
