// `npm run bench` (full, a few minutes), `npm run bench -- --quick` (about a minute),
// `npm run bench -- --smoke` (seconds: proves every process starts, gets measured and stops).
// `npm run bench -- routing` (with `--quick` or `--smoke` too) runs the routing simulation instead
// (bench/routing.ts): replica-choice policies on simulated batching model servers.
// `npm run bench:pools` (`npm run bench -- pools`, with `--quick` or `--smoke` too) runs the pool
// benchmark instead (bench/pool-swaps.ts): four models swapping on two units behind a router.
//
// A fast replica (bench/replica.ts) and, in front of it, each its own process: Sluice at info and
// at warn (workers: 1), Sluice info with workers: 2, nginx (one process), HAProxy (one thread),
// Caddy (GOMAXPROCS=1), http-proxy, @fastify/http-proxy and the bare uWS + net.Socket stack;
// `direct` is the replica alone. Scenarios (bench/lib/measure.ts):
//   1 throughput   autocannon, 50 connections, 1 KiB each way: req/s and relay CPU µs/request
//   2 ttfb         sequential requests: p50/p90/p99/p99.9, added over direct
//   3 tokens       1,000 SSE streams from a batching replica, a token each per 100 ms: per-token
//                  delivery added over direct, relay CPU per token
//   3b tokensFew   the same with 20 streams, a token each per 20 ms
//   3c newStreams  1,000 streams each on a new connection, a token a second, 6 s each: relay CPU
//                  per stream set up (after 5,000 short ones, so the relay is warm)
//   4 slowReader   64 MiB read at 4 MiB/s: relay RSS growth
//   5 idleStreams  1,000 idle open streams: relay memory per stream
//   6 coldStart    500 requests at once to a cold launched service: lost, readiness → first request
//   7 uploads      1 KiB uploads with Content-Length, chunked, chunked in pieces: TTFB, relay CPU/request
//   8 heldUploads  1,000 callers each holding 1 MiB of a chunked body open: relay RSS growth
//                  (bench/lib/uploads.ts)
// 1–3c and 7 run in rounds with the peers interleaved (the first peer rotates every round), after a
// warm-up; 4–6 and 8 once. Output: BENCHMARKS.md, results/latest.json (every per-round value) and
// results/ttfb.svg — under bench/ for a full run, under .bench-results/<mode>/ otherwise, or
// under --out DIR. Settings: bench/README.md.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Child, installCleanup, startChild, startedProcesses } from './lib/children.js';
import { fetchOnce } from './lib/client.js';
import * as measure from './lib/measure.js';
import { type Mode, type PeerId, type ScenarioId, type Settings, settingsFor } from './lib/modes.js';
import { closePeerStores, LABEL, order, type Peer, type SystemBinaries, startPeer } from './lib/peers.js';
import { markdown } from './lib/report.js';
import { derive, emptyScenarios, type PeerRecord, type Record } from './lib/results.js';
import { keepRoutingSection, runRouting } from './routing.js';
import { runPools } from './pool-swaps.js';
import { ttfbSvg } from './lib/svg.js';
import { ensureSystemPeer, type SystemPeerId } from './lib/system-peers.js';
import { INFER_ANSWER, INFER_PATH, INFER_REQUEST } from './lib/workload.js';
import { FRAMINGS, heldUploads, uploads } from './lib/uploads.js';
import { loadUwsBuild } from '../src/http/uws-build.js';
import { newStreams } from './lib/new-streams.js';

const T0 = performance.now();
function log(message: string): void {
  process.stderr.write(`bench ${((performance.now() - T0) / 1000).toFixed(1).padStart(5)} s: ${message}\n`);
}

interface Args {
  mode: Mode;
  out: string;
  /** `routing`: the routing simulation instead of the relay benchmark. */
  routing: boolean;
  /** `pools`: the pool benchmark instead. */
  pools: boolean;
}

function parseArgs(argv: string[]): Args {
  let mode: Mode = 'full';
  let out: string | undefined;
  let routing = false;
  let pools = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === 'routing') routing = true;
    else if (a === 'pools') pools = true;
    else if (a === '--quick') mode = 'quick';
    else if (a === '--smoke') mode = 'smoke';
    else if (a === '--full') mode = 'full';
    else if (a === '--out' && argv[i + 1] !== undefined) out = argv[++i]!;
    else if (a.startsWith('--out=')) out = a.slice('--out='.length);
    else throw new Error(`unknown argument "${a}": use routing, pools, --quick, --smoke, --full, --out DIR`);
  }
  const benchDir = fileURLToPath(new URL('../../bench/', import.meta.url));
  return { mode, routing, pools, out: resolve(out ?? (mode === 'full' ? benchDir : join('.bench-results', mode))) };
}

/** Every peer must answer exactly what the replica answers before anything is measured. */
async function sanityCheck(peer: Peer): Promise<void> {
  const { status, body } = await fetchOnce(peer.target, INFER_PATH, INFER_REQUEST);
  if (status !== 200 || body !== INFER_ANSWER) {
    throw new Error(`${peer.label} answered ${status} ${JSON.stringify(body.slice(0, 200))}, not the replica's answer`);
  }
}

async function startAll(s: Settings, replica: Child, rec: Record): Promise<{ peers: Peer[]; binaries: SystemBinaries }> {
  const binaries: SystemBinaries = {};
  const skipped = new Map<string, string>();
  for (const id of ['nginx', 'haproxy', 'caddy'] as SystemPeerId[]) {
    if (!s.peers.includes(id)) continue;
    const found = ensureSystemPeer(id, s.installPeers, log);
    if (found.path === undefined) skipped.set(id, found.reason);
    else {
      binaries[id] = found.path;
      rec.versions[id] = found.version + (found.installedNow ? ' (installed by this run with apt)' : '');
    }
  }
  // Started together (each is its own process), kept in the configured order.
  const started = await Promise.all(
    s.peers.map(async (id): Promise<Peer | undefined> => {
      const record: PeerRecord = { id, label: LABEL[id] };
      rec.peers.push(record);
      const reason = skipped.get(id);
      if (reason !== undefined) {
        record.skipped = reason;
        log(`${LABEL[id]} skipped: ${reason}`);
        return undefined;
      }
      try {
        const peer = await startPeer(id, replica, binaries);
        await sanityCheck(peer);
        return peer;
      } catch (err) {
        // These programs are not ours: a system whose copy cannot run this config gets it reported, not a failed run.
        if (id !== 'nginx' && id !== 'haproxy' && id !== 'caddy') throw err;
        record.skipped = `could not start: ${(err as Error).message}`;
        log(`${LABEL[id]} skipped: ${record.skipped}`);
        return undefined;
      }
    }),
  );
  rec.peers.sort((a, b) => s.peers.indexOf(a.id) - s.peers.indexOf(b.id));
  const peers = started.filter((p): p is Peer => p !== undefined);
  log(peers.map((p) => `${p.label}${p.relay === undefined ? '' : ` pid ${p.relay.pid}`} :${new URL(p.target.origin).port}`).join(', '));
  return { peers, binaries };
}

/** The new-stream warm-up's streams: two tokens 250 ms apart, each batch started over one second. */
const NEW_STREAMS_WARMUP_TOKENS = 2;
const NEW_STREAMS_WARMUP_GAP_MS = 250;

type RoundScenario = 'throughput' | 'ttfb' | 'tokens' | 'tokensFew' | 'newStreams';

async function runRounds(s: Settings, peers: Peer[], rec: Record): Promise<void> {
  const has = (id: ScenarioId): boolean => s.scenarios.includes(id);
  if (has('throughput') && s.warmupS > 0) {
    for (const p of peers) {
      log(`warm-up ${p.label} ${s.warmupS} s`);
      await measure.warmUp(p, s);
    }
  }
  if (has('newStreams') && s.newStreamsWarmup > 0) {
    for (const p of peers) {
      log(`warm-up ${p.label} ${s.newStreamsWarmup} new streams`);
      // In batches of a round's size: as many open at once as in a round, so no relay ends the
      // warm-up with a pool of idle upstream connections larger than a round's, closing in it.
      for (let done = 0; done < s.newStreamsWarmup; done += s.newStreams) {
        await newStreams(p.target, undefined, Math.min(s.newStreams, s.newStreamsWarmup - done), NEW_STREAMS_WARMUP_TOKENS, NEW_STREAMS_WARMUP_GAP_MS);
      }
    }
  }
  const sc = rec.scenarios;
  for (let round = 0; round < s.rounds; round++) {
    for (const scenario of ['throughput', 'ttfb', 'tokens', 'tokensFew', 'newStreams'] as RoundScenario[]) {
      if (!has(scenario)) continue;
      const inOrder = order(peers, round);
      sc[scenario].order.push(inOrder.map((p) => p.id));
      for (const p of inOrder) {
        await sleep(200);
        let summary: string;
        if (scenario === 'throughput') {
          const r = await measure.throughput(p, s);
          (sc.throughput.rounds[p.id] ??= []).push(r);
          summary = `${Math.round(r.reqPerS)} req/s, relay ${r.relayCpuUsPerReq?.toFixed(1) ?? '–'} µs/req`;
        } else if (scenario === 'ttfb') {
          const r = await measure.ttfb(p, s);
          (sc.ttfb.rounds[p.id] ??= []).push(r);
          summary = `p50 ${r.p50Us.toFixed(0)} µs, p99 ${r.p99Us.toFixed(0)} µs`;
        } else if (scenario === 'newStreams') {
          const r = await newStreams(p.target, p.relay?.pid, s.newStreams, s.newStreamTokens, s.newStreamGapMs);
          (sc.newStreams.rounds[p.id] ??= []).push(r);
          summary = `${r.completed}/${r.streams} streams, ${r.tokens} tokens, relay ${r.relayCpuUsPerStream?.toFixed(1) ?? '–'} µs/stream`;
        } else {
          const r = await measure.tokens(p, s, scenario === 'tokensFew');
          (sc[scenario].rounds[p.id] ??= []).push(r);
          summary = `${r.tokens} tokens${r.incompleteStreams > 0 ? ` (${r.incompleteStreams} streams cut short)` : ''}, delivery p50 ${r.deliveryP50Us.toFixed(0)} µs, p99 ${r.deliveryP99Us.toFixed(0)} µs, relay ${r.relayCpuUsPerToken?.toFixed(1) ?? '–'} µs/token`;
        }
        log(`round ${round + 1}/${s.rounds} ${scenario} ${p.label}: ${summary}`);
      }
    }
    if (has('uploads')) {
      const inOrder = order(peers.filter((p) => s.uploadPeers.includes(p.id)), round);
      sc.uploads.order.push(inOrder.map((p) => p.id));
      for (const p of inOrder) {
        for (const framing of FRAMINGS) {
          await sleep(200);
          const r = await uploads(p, framing, s.uploadRequests, s.connections);
          ((sc.uploads.rounds[p.id] ??= {})[framing] ??= []).push(r);
          log(`round ${round + 1}/${s.rounds} uploads ${p.label} ${framing}: TTFB p50 ${r.ttfbP50Us.toFixed(0)} µs, p99 ${r.ttfbP99Us.toFixed(0)} µs; ${s.connections} connections: ${Math.round(r.reqPerS)} req/s, relay ${r.relayCpuUsPerReq?.toFixed(1) ?? '–'} µs/req`);
        }
      }
    }
  }
}

/**
 * The memory scenarios run on a fresh process of each relay (started, primed, measured, stopped),
 * so the baseline is not a heap still shrinking after the load of the rounds.
 */
async function onFreshRelay<T>(id: PeerId, rounds: Peer[], replica: Child, binaries: SystemBinaries, s: Settings, run: (p: Peer) => Promise<T>): Promise<T> {
  if (!s.freshRelays) return run(rounds.find((p) => p.id === id)!);
  const peer = await startPeer(id, replica, binaries);
  try {
    await sanityCheck(peer);
    await measure.primeForMemory(peer, s);
    return await run(peer);
  } finally {
    await peer.relay?.stop();
  }
}

async function runOnce(s: Settings, peers: Peer[], replica: Child, binaries: SystemBinaries, rec: Record): Promise<void> {
  const relays = peers.filter((p) => p.relay !== undefined).map((p) => p.id);
  if (s.scenarios.includes('slowReader')) {
    for (const id of relays.filter((r) => s.slowPeers.includes(r))) {
      log(`slow reader ${LABEL[id]}: ${s.slowBytes / 1048576} MiB at ${s.slowRateBytesPerS / 1048576} MiB/s`);
      const r = await onFreshRelay(id, peers, replica, binaries, s, (p) => measure.slowReader(p, s));
      rec.scenarios.slowReader.peers[id] = r;
      log(`slow reader ${LABEL[id]}: RSS growth ${r.growthMiB.toFixed(1)} MiB`);
    }
  }
  if (s.scenarios.includes('idleStreams')) {
    for (const id of relays) {
      const r = await onFreshRelay(id, peers, replica, binaries, s, (p) => measure.idleStreams(p, s));
      rec.scenarios.idleStreams.peers[id] = r;
      log(`idle streams ${LABEL[id]}: ${r.perStreamKiB.toFixed(1)} KiB per stream`);
    }
  }
  if (s.scenarios.includes('heldUploads')) {
    for (const id of relays.filter((r) => s.heldPeers.includes(r))) {
      log(`held uploads ${LABEL[id]}: ${s.heldCallers} callers, ${s.heldBytes / 1024} KiB each`);
      const r = await onFreshRelay(id, peers, replica, binaries, s, (p) => heldUploads(p, s.heldCallers, s.heldBytes));
      rec.scenarios.heldUploads.peers[id] = r;
      log(`held uploads ${LABEL[id]}: RSS ${r.rssBeforeMiB.toFixed(1)} → peak ${r.rssPeakMiB.toFixed(1)} MiB (+${r.growthMiB.toFixed(1)}), ${(r.bytesWritten / 1048576).toFixed(0)} MiB written by then`);
    }
  }
  if (s.scenarios.includes('coldStart')) {
    const r = await measure.coldStart(s);
    rec.scenarios.coldStart.run = r;
    log(`cold start: ${r.lost} lost of ${r.requests}, readiness → first request ${r.readyToFirstRequestMs?.toFixed(1) ?? '–'} ms`);
  }
}

/** Every section of `text` (a BENCHMARKS.md) between `<!-- name:begin … -->` and `<!-- name:end -->`, in order. */
function markedSections(text: string): string[] {
  return [...text.matchAll(/<!-- ([\w-]+):begin[^>]*-->[\s\S]*?<!-- \1:end -->/g)].map((m) => m[0]);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  installCleanup();
  const started = Date.now();
  const flags = process.argv.slice(2).join(' ');
  const command = process.env['npm_lifecycle_event'] === 'bench' ? `npm run bench${flags === '' ? '' : ` -- ${flags}`}` : `node dist/bench/run.js${flags === '' ? '' : ` ${flags}`}`;
  if (args.pools) {
    log(`pool benchmark, ${args.mode} mode; output in ${args.out}`);
    await runPools(args.mode, args.out, process.env['npm_lifecycle_event'] === 'bench:pools' ? `npm run bench:pools${flags === 'pools' ? '' : ` -- ${flags.replace(/^pools ?/, '')}`}` : command, log);
    log(`${Math.round((Date.now() - started) / 1000)} s; ${join(args.out, 'BENCHMARKS.md')}, results/pools.json`);
    return;
  }
  if (args.routing) {
    log(`routing simulation, ${args.mode} mode; output in ${args.out}`);
    await runRouting(args.mode, args.out, command, log);
    log(`${Math.round((Date.now() - started) / 1000)} s; ${join(args.out, 'BENCHMARKS.md')}, results/routing.json, results/routing.svg`);
    return;
  }
  const s = settingsFor(args.mode);
  const rec: Record = {
    schema: 2,
    mode: s.mode,
    command,
    startedAt: new Date(started).toISOString(),
    wallSeconds: 0,
    machine: { cpuModel: cpus()[0]?.model ?? 'unknown', cpus: cpus().length, kernel: release(), memTotalMiB: Math.round(totalmem() / 1048576), loadavgAtStart: loadavg(), loadavgAtEnd: [] },
    node: process.version,
    // The build the gateway and `bare` children load: the same choice in this process (SLUICE_UWS_BUILD or the newest).
    versions: { 'uWebSockets.js': (await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined)).id },
    settings: s,
    peers: [],
    processes: [],
    scenarios: emptyScenarios(),
  };
  log(`${s.mode} run: ${s.peers.length} peers, scenarios ${s.scenarios.join(', ')}; output in ${args.out}`);
  const children: Child[] = [];
  try {
    const replica = await startChild('replica', new URL('./replica.js', import.meta.url));
    children.push(replica);
    const { peers, binaries } = await startAll(s, replica, rec);
    for (const p of peers) if (p.relay !== undefined) children.push(p.relay);
    await runRounds(s, peers, rec);
    // The rounds' relays are stopped first when the memory scenarios run on fresh ones.
    if (s.freshRelays) await Promise.all(peers.map((p) => p.relay?.stop()));
    await runOnce(s, peers, replica, binaries, rec);
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await closePeerStores();
  }
  rec.processes = [...startedProcesses()];
  rec.machine.loadavgAtEnd = loadavg();
  rec.wallSeconds = Math.round((Date.now() - started) / 100) / 10;
  rec.derived = derive(rec);

  mkdirSync(join(args.out, 'results'), { recursive: true });
  const chartTitle = `Time to first byte, ${s.ttfbRequests} sequential requests (µs, median of ${s.rounds} round${s.rounds === 1 ? '' : 's'})`;
  const ran = rec.peers.filter((p) => p.skipped === undefined);
  writeFileSync(join(args.out, 'results', 'ttfb.svg'), ttfbSvg(chartTitle, ran.map((p) => ({ label: p.label, ttfb: rec.derived!.ttfb[p.id] }))));
  const text = markdown(rec, s.scenarios.includes('ttfb') ? 'results/ttfb.svg' : undefined);
  // The sections of runs of their own stay: the routing simulation's, and every section between
  // `<!-- name:begin … -->` and `<!-- name:end -->` (the pool benchmark's, the shared limits').
  const previous = join(args.out, 'BENCHMARKS.md');
  const old = existsSync(previous) ? readFileSync(previous, 'utf8') : undefined;
  const marked = old === undefined ? [] : markedSections(old);
  const kept = keepRoutingSection(text, old);
  writeFileSync(previous, marked.length === 0 ? kept : `${kept.trimEnd()}\n\n${marked.join('\n\n')}\n`);
  writeFileSync(join(args.out, 'results', 'latest.json'), `${JSON.stringify(rec, null, 2)}\n`);
  process.stdout.write(`\n${text}\n`);
  log(`${rec.wallSeconds} s; ${join(args.out, 'BENCHMARKS.md')}, results/latest.json, results/ttfb.svg`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
