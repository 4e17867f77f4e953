// `npm run bench:pools` (= `npm run bench -- pools`; `--quick`, `--smoke` for shorter runs): four
// models on a pool of two units behind one router, through the real gateway, with launched
// simulated model servers (bench/pool-replica.ts) that take a fixed load time before /health
// answers and a fixed time to exit after SIGTERM. A seeded trace of streamed chat requests
// (bench/lib/pool-trace.ts) switches models in bursts with idle gaps; each policy plays the same
// trace on a fresh gateway:
//   sluice-pool        one pool `gpu` of 2 units; every model may take either unit; the least
//                      recently used idle replica is stopped for a model that needs a unit
//   llama-swap-groups  llama-swap's group engine as its documentation describes it for two GPUs:
//                      each model pinned to one GPU in its command, one group per GPU with
//                      `swap: true, exclusive: false` (one model at a time per group), requests
//                      queued across a swap. Played by the same gateway with one pool of 1 unit
//                      per GPU: a reproduction of the documented policy, not of llama-swap itself
// Figures (bench/lib/pool-analysis.ts): requests lost (anything but a 200 with every token and
// [DONE]), swaps (sluice_pool_evictions_total, and the journals' count), what a swap added beyond
// the replicas' own exit, load and first token, TTFT p50/p99 per model.
//
// Output: the section of BENCHMARKS.md between the pools markers (kept by the main benchmark's
// runs), results/pools.json — under bench/ for a full run, under .bench-results/<mode>/ otherwise
// (or --out DIR). Settings: bench/README.md.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Child, recordProcess, startChild, startedProcesses } from './lib/children.js';
import type { Mode } from './lib/modes.js';
import { figures, lives, type PolicyFigures, type Start } from './lib/pool-analysis.js';
import { MODELS, play, type RequestResult, trace } from './lib/pool-trace.js';
import { intEnv, listEnv } from './lib/settings.js';
import { BENCH_TOKEN, BENCH_TOKEN_SHA256 } from './lib/workload.js';

export const POOL_POLICIES = ['sluice-pool', 'llama-swap-groups'] as const;
export type PoolPolicy = (typeof POOL_POLICIES)[number];

/** llama-swap's groups need each model pinned to a GPU: the most used two apart. */
const PINNED: Record<string, number> = { chat: 0, coder: 1, summarize: 1, translate: 0 };
const ROUTER = 'models';

export interface PoolSettings {
  mode: Mode;
  durationS: number;
  seed: number;
  loadMs: number;
  exitMs: number;
  tokenMs: number;
  pace: number;
  policies: PoolPolicy[];
}

/** `pace`: the trace's gaps and spreads × this (smoke compresses them with the load time). */
const SIZES: Record<Mode, { durationS: number; loadMs: number; exitMs: number; pace: number }> = {
  full: { durationS: 120, loadMs: 3_000, exitMs: 500, pace: 1 },
  quick: { durationS: 40, loadMs: 3_000, exitMs: 500, pace: 1 },
  smoke: { durationS: 4, loadMs: 200, exitMs: 50, pace: 0.1 },
};

export function poolSettings(mode: Mode): PoolSettings {
  const d = SIZES[mode];
  return {
    mode,
    durationS: intEnv('BENCH_POOLS_DURATION_S', d.durationS, 1, 3_600),
    seed: intEnv('BENCH_POOLS_SEED', 29, 0, 2 ** 31 - 1),
    loadMs: intEnv('BENCH_POOLS_LOAD_MS', d.loadMs, 0, 600_000),
    exitMs: intEnv('BENCH_POOLS_EXIT_MS', d.exitMs, 0, 4_000),
    tokenMs: intEnv('BENCH_POOLS_TOKEN_MS', 20, 1, 10_000),
    pace: d.pace,
    policies: listEnv('BENCH_POOLS_POLICIES', POOL_POLICIES, POOL_POLICIES),
  };
}

export interface PoolRecord {
  schema: 1;
  mode: Mode;
  command: string;
  startedAt: string;
  wallSeconds: number;
  machine: { cpus: number; cpuModel: string; kernel: string; loadavgAtStart: number[]; loadavgAtEnd: number[] };
  node: string;
  settings: PoolSettings;
  /** Every process the run started, the replicas the gateways launched included (pids). */
  processes: { name: string; pid: number }[];
  policies: Partial<Record<PoolPolicy, { figures: PolicyFigures; starts: Start[]; requests: RequestResult[] }>>;
}

const poolOf = (policy: PoolPolicy, model: string): string => (policy === 'sluice-pool' ? 'gpu' : `gpu${PINNED[model]}`);

function gatewayConfig(policy: PoolPolicy, s: PoolSettings, journal: string): Record<string, unknown> {
  const replica = fileURLToPath(new URL('./pool-replica.js', import.meta.url));
  const pools = policy === 'sluice-pool' ? [{ name: 'gpu', size: 2 }] : [{ name: 'gpu0', size: 1 }, { name: 'gpu1', size: 1 }];
  const token = { name: 'bench', sha256: BENCH_TOKEN_SHA256 };
  return {
    listen: { host: '127.0.0.1', port: 0 },
    workers: 1,
    log: { level: 'warn' },
    pools,
    routers: [{ slug: ROUTER, tokens: [token] }],
    services: MODELS.map((model) => ({
      slug: model,
      models: [model],
      tokens: [token],
      queue: { maxRequests: 10_000, maxWaitMs: 600_000 },
      timeouts: { responseHeadersMs: 600_000, bodyIdleMs: 600_000 },
      replicas: {
        command: [process.execPath, replica],
        env: { MODEL: model, POOL: poolOf(policy, model), UNITS: '{units}', JOURNAL: journal, LOAD_MS: String(s.loadMs), EXIT_MS: String(s.exitMs), TOKEN_MS: String(s.tokenMs) },
        readyPath: '/health',
        startTimeoutMs: s.loadMs + 60_000,
        pool: poolOf(policy, model),
        max: 1,
        idleTimeoutMs: 3_600_000, // no idle stops during the run: every stop is for another model
        concurrency: 0,
      },
    })),
  };
}

/** sluice_pool_evictions_total, summed over its series. */
function evictionsOf(metrics: string): number {
  let n = 0;
  for (const line of metrics.split('\n')) if (line.startsWith('sluice_pool_evictions_total{')) n += Number(line.slice(line.lastIndexOf(' ') + 1));
  return n;
}

async function runPolicy(policy: PoolPolicy, s: PoolSettings, log: (m: string) => void): Promise<{ results: RequestResult[]; journal: string; evictions: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-pools-'));
  const journal = join(dir, 'journal.jsonl');
  let gateway: Child | undefined;
  try {
    gateway = await startChild(`gateway ${policy}`, new URL('./routing-gateway.js', import.meta.url), { env: { BENCH_ROUTING_CONFIG: JSON.stringify(gatewayConfig(policy, s, journal)) } });
    const requests = trace({ durationS: s.durationS, seed: s.seed, pace: s.pace });
    log(`pools ${policy}: ${requests.length} requests over ${s.durationS} s, load ${s.loadMs} ms, exit ${s.exitMs} ms`);
    const results = await play(`http://127.0.0.1:${gateway.port}/api/v1/services/${ROUTER}/request/v1/chat/completions`, BENCH_TOKEN, requests);
    const evictions = evictionsOf(await (await fetch(`http://127.0.0.1:${gateway.port}/metrics`)).text());
    await gateway.stop(15_000);
    const text = existsSync(journal) ? readFileSync(journal, 'utf8') : '';
    return { results, journal: text, evictions };
  } finally {
    await gateway?.stop(15_000);
    rmSync(dir, { recursive: true, force: true });
  }
}

const BEGIN = '<!-- pools:begin (written by `npm run bench:pools`) -->';
const END = '<!-- pools:end -->';

function withSection(old: string | undefined, section: string): string {
  if (old === undefined) return `# Sluice benchmarks\n\n${section}\n`;
  const begin = old.indexOf(BEGIN);
  const end = old.indexOf(END);
  if (begin < 0 || end < begin) return `${old.trimEnd()}\n\n${section}\n`;
  return `${old.slice(0, begin)}${section}${old.slice(end + END.length)}`;
}

const ms = (v: number): string => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '–');
const ms1 = (v: number): string => (Number.isFinite(v) ? v.toFixed(1) : '–');

export function poolsMarkdown(rec: PoolRecord): string {
  const s = rec.settings;
  const out = [
    BEGIN,
    '## Pool swaps: four models on two units',
    '',
    `Generated by \`${rec.command}\` (${rec.mode} mode) on ${rec.startedAt.slice(0, 10)}, ${rec.startedAt.slice(11, 16)} UTC, in ${Math.round(rec.wallSeconds)} s; ${rec.machine.cpus} × ${rec.machine.cpuModel}, Linux ${rec.machine.kernel}, Node ${rec.node}; load average ${rec.machine.loadavgAtStart.map((l) => l.toFixed(2)).join(' ')} at start, ${rec.machine.loadavgAtEnd.map((l) => l.toFixed(2)).join(' ')} at the end.`,
    '',
    `Four models (${MODELS.join(', ')}; 40, 30, 20 and 10 % of the bursts) behind one router of the real gateway (\`workers: 1\`), each a launched simulated model server (\`bench/pool-replica.ts\`, \`max: 1\`, one unit) that loads for ${s.loadMs.toLocaleString('en-US')} ms before \`/health\` answers, takes ${s.exitMs} ms to exit after SIGTERM, and streams a token every ${s.tokenMs} ms. The trace (seed ${s.seed}, ${s.durationS} s${s.pace === 1 ? '' : `, its times × ${s.pace}`}): bursts of 1 to 6 streamed chat requests for one model over up to 1.5 s, 8 to 40 tokens each, 0.2 to 3 s apart (bursts for other models arrive during a swap) or, one time in four, after an idle gap of 5 to 15 s. Each policy plays the same trace on a fresh gateway. *Lost*: anything but a 200 with every token and \`[DONE]\`. *Swaps*: \`sluice_pool_evictions_total\` (the journals count the same starts on another model's units). *Added by a swap*: the request's first token at the client minus the later of its sending and the evicted replica's last answer, minus the replicas' own work (the evicted one's SIGTERM → exit, the new one's process start → listening, request → first token written), every time on CLOCK_MONOTONIC, which the processes share; target ≤ 50 ms.`,
    '',
    '| policy | requests | lost | swaps | cold starts | added by a swap p50 ms | added p99 ms | added max ms | TTFT p50 ms | TTFT p99 ms | requests that waited for a start |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const p of POOL_POLICIES) {
    const f = rec.policies[p]?.figures;
    if (f === undefined) continue;
    out.push(`| ${p} | ${f.requests} | ${f.lost} | ${f.evictions} | ${f.coldStarts} | ${ms1(f.swapAddedMs.p50)} | ${ms1(f.swapAddedMs.p99)} | ${ms1(f.swapAddedMs.max)} | ${ms(f.ttftMs.p50)} | ${ms(f.ttftMs.p99)} | ${f.waitedForStart} |`);
  }
  out.push('', 'TTFT per model, p50 / p99 ms (requests):', '', `| policy | ${MODELS.join(' | ')} |`, `| --- | ${MODELS.map(() => '---:').join(' | ')} |`);
  for (const p of POOL_POLICIES) {
    const f = rec.policies[p]?.figures;
    if (f === undefined) continue;
    out.push(`| ${p} | ${MODELS.map((m) => { const t = f.ttftByModel[m]; return t === undefined ? '–' : `${ms(t.p50)} / ${ms(t.p99)} (${t.n})`; }).join(' | ')} |`);
  }
  out.push('', 'Where a swap\'s time goes, medians (ms): the replicas\' own work, then what the gateway added:', '', '| policy | evicted replica\'s exit | new replica\'s load | free → SIGTERM | exit → next process start | listening → request received | first token written → read | journal swaps |', '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const p of POOL_POLICIES) {
    const f = rec.policies[p]?.figures;
    if (f === undefined) continue;
    out.push(`| ${p} | ${ms1(f.replicaExitMs)} | ${ms1(f.replicaLoadMs)} | ${ms1(f.swapParts.decideMs)} | ${ms1(f.swapParts.exitToSpawnMs)} | ${ms1(f.swapParts.readyToRequestMs)} | ${ms1(f.swapParts.relayMs)} | ${f.swaps} |`);
  }
  const parts: [keyof PolicyFigures['swapParts'], string][] = [
    ['decideMs', 'free → SIGTERM'],
    ['exitToSpawnMs', 'exit → next process start'],
    ['readyToRequestMs', 'listening → request received (the readiness poll — every 10 ms for the first 2 s of a start and around its expected time, every 25 ms otherwise until 30 s — then the queued request sent)'],
    ['relayMs', 'first token written → read'],
  ];
  for (const p of POOL_POLICIES) {
    const f = rec.policies[p]?.figures;
    if (f === undefined || f.swaps === 0) continue;
    const verdict = (v: number): string => `${ms1(v)} ms (${v <= 50 ? 'met' : 'missed'})`;
    const largest = parts.reduce((a, b) => (f.swapParts[b[0]] > f.swapParts[a[0]] ? b : a));
    out.push('', `${p}: added by a swap against the target of ≤ 50 ms: p50 ${verdict(f.swapAddedMs.p50)}, p99 ${verdict(f.swapAddedMs.p99)}; its largest part is ${largest[1]}, median ${ms1(f.swapParts[largest[0]])} ms.`);
  }
  out.push(
    '',
    `**\`llama-swap-groups\` is a reproduction of documented behaviour, not a run of llama-swap** (no Go toolchain here; nothing of llama-swap was built or run). What is reproduced, from llama-swap's \`config.example.yaml\` and \`internal/router/design.md\` (snapshot of 2026-08): the group engine on two GPUs — each model's command pins it to a GPU (llama-swap hands out no GPUs; here ${Object.entries(PINNED).filter(([, g]) => g === 0).map(([m]) => m).join(' and ')} on GPU 0, ${Object.entries(PINNED).filter(([, g]) => g === 1).map(([m]) => m).join(' and ')} on GPU 1: the two most used apart and the bursts split 50/50, the best pinning for this mix, which its operator must know in advance), a group per GPU with \`swap: true\` (one member at a time) and \`exclusive: false\` (the other GPU untouched); a request for another member while one runs is queued and the swap waits until the running member has nothing in flight (its FIFO scheduler, since 2026-06; the releases before it made them wait on the group's lock: neither refuses a request during a swap, as the issue's "no queue across a swap" would have it). The same gateway plays it with one pool of one unit per GPU. Not reproduced or measured: llama-swap's own overheads (its health-check pace, its proxy), its per-model limit of 10 requests queued or in flight (beyond it \`429\`; the most this trace had of one model at once: ${maxOutstanding(rec)}), its queue order (FIFO by arrival, a priority per model; Sluice ranks by the first queued request's priority, then age — equal here), and the releases before 2026-06, which served the request that caused a swap to its end while holding the group's lock (every other request of the group waited behind it). The matrix engine can let any two models share the machine only if they are not pinned to the same GPU, so with pinned GPUs it is the same as these groups.`,
    '',
    'Per-request and per-swap figures and settings: `results/pools.json`.',
    END,
  );
  return out.join('\n');
}

/** The most requests of one model queued or in flight at once, over every policy. */
function maxOutstanding(rec: PoolRecord): number {
  let most = 0;
  for (const p of Object.values(rec.policies)) most = Math.max(most, p.figures.mostAtOnce);
  return most;
}

/** Runs every policy on the same trace and writes the outputs; resolves with the record. */
export async function runPools(mode: Mode, outDir: string, command: string, log: (m: string) => void): Promise<PoolRecord> {
  const s = poolSettings(mode);
  const started = Date.now();
  const rec: PoolRecord = {
    schema: 1,
    mode,
    command,
    startedAt: new Date(started).toISOString(),
    wallSeconds: 0,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', kernel: release(), loadavgAtStart: loadavg(), loadavgAtEnd: [] },
    node: process.version,
    settings: s,
    processes: [],
    policies: {},
  };
  for (const policy of s.policies) {
    const { results, journal, evictions } = await runPolicy(policy, s, log);
    const replicas = lives(journal);
    for (const r of replicas) recordProcess(`replica ${policy} ${r.model}`, r.pid);
    const derived = figures(results, replicas, evictions);
    rec.policies[policy] = { ...derived, requests: results };
    const f = derived.figures;
    log(`pools ${policy}: ${f.lost} lost of ${f.requests}, ${f.evictions} swaps (${f.swaps} in the journals), ${f.coldStarts} cold starts, added by a swap p50 ${ms1(f.swapAddedMs.p50)} / max ${ms1(f.swapAddedMs.max)} ms, TTFT p50 ${ms(f.ttftMs.p50)} / p99 ${ms(f.ttftMs.p99)} ms`);
  }
  rec.processes = [...startedProcesses()];
  rec.machine.loadavgAtEnd = loadavg();
  rec.wallSeconds = Math.round((Date.now() - started) / 100) / 10;

  mkdirSync(join(outDir, 'results'), { recursive: true });
  writeFileSync(join(outDir, 'results', 'pools.json'), `${JSON.stringify(rec, null, 2)}\n`);
  const file = join(outDir, 'BENCHMARKS.md');
  const section = poolsMarkdown(rec);
  writeFileSync(file, withSection(existsSync(file) ? readFileSync(file, 'utf8') : undefined, section));
  process.stdout.write(`\n${section}\n`);
  return rec;
}
