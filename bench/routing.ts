// `npm run bench -- routing` (`--quick`, `--smoke` for shorter runs): the replica-choice policies
// side by side on simulated batching model servers of uneven speeds, through the real gateway.
//
// Each policy gets a fresh set of simulated replicas (bench/sim-model-server.ts: continuous
// batching, time per token growing with the batch, a queue behind it, a prefix cache, vLLM's
// metric names on /metrics) and a fresh gateway (bench/routing-gateway.ts, `workers: 1`), then the
// same seeded multi-turn chat workload (bench/lib/chat-workload.ts). Policies:
//   fewest-in-flight     the default choice
//   queue-aware          `replicas.load: { preset: vllm }`
//   queue-aware+affinity the same, plus `routing.affinityHeader: X-Session-Id`
// Figures: time to first token p50/p99 and completion time p50/p99 (client side, ms), errors, and
// the share of prompt tokens the replicas served from their prefix caches. Rounds interleave the
// policies; each policy's figures pool its requests over every round.
//
// Output: a section of BENCHMARKS.md between the routing markers (kept by the main benchmark's
// runs), results/routing.json and results/routing.svg — under bench/ for a full run, under
// .bench-results/<mode>/ otherwise (or --out DIR). Settings: BENCH_ROUTING_DURATION_S (sessions
// start over this long), BENCH_ROUTING_SESSIONS_PER_10S, BENCH_ROUTING_ROUNDS, BENCH_ROUTING_SEED,
// BENCH_ROUTING_INTERVAL_MS (replicas.load.intervalMs).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg, release } from 'node:os';
import type { EngineSpec, EngineStats } from './lib/batching-engine.js';
import { plan, runSessions, type TurnResult } from './lib/chat-workload.js';
import { type Child, startChild } from './lib/children.js';
import type { Mode } from './lib/modes.js';
import { intEnv } from './lib/settings.js';
import { type Summary, summarize } from './lib/stats.js';
import { barsSvg } from './lib/svg.js';
import { BENCH_SLUG, BENCH_TOKEN, BENCH_TOKEN_SHA256 } from './lib/workload.js';

export const POLICIES = ['fewest-in-flight', 'queue-aware', 'queue-aware+affinity'] as const;
export type Policy = (typeof POLICIES)[number];

/**
 * Uneven replicas, as a mixed fleet would be: a fast one, a slightly slower one, and one at half
 * speed with less than half the KV cache. As on real servers the KV cache, not the batch size,
 * limits how many sequences run: a conversation's turn holds 1,000 to 3,000 tokens of it.
 */
export const REPLICAS: readonly EngineSpec[] = [
  { name: 'fast', batch: 32, decodeMs: 10, batchSlowdown: 0.03, prefillMsPer1k: 60, kvTokens: 24_000, prefixCacheTokens: 60_000 },
  { name: 'medium', batch: 32, decodeMs: 13, batchSlowdown: 0.03, prefillMsPer1k: 80, kvTokens: 24_000, prefixCacheTokens: 60_000 },
  { name: 'slow', batch: 32, decodeMs: 20, batchSlowdown: 0.03, prefillMsPer1k: 120, kvTokens: 10_000, prefixCacheTokens: 30_000 },
];

export interface RoutingSettings {
  mode: Mode;
  durationS: number;
  sessionsPerS: number;
  rounds: number;
  seed: number;
  intervalMs: number;
}

/**
 * 2.6 sessions per second keep about 15 requests in flight, which the three caches hold together
 * (about 12 + 12 + 5 turns); a third of them would overflow the slow replica's.
 */
const SIZES: Record<Mode, { durationS: number; sessionsPerS: number; rounds: number }> = {
  full: { durationS: 60, sessionsPerS: 2.6, rounds: 2 },
  quick: { durationS: 20, sessionsPerS: 2.6, rounds: 1 },
  smoke: { durationS: 4, sessionsPerS: 2.6, rounds: 1 },
};

export function routingSettings(mode: Mode): RoutingSettings {
  const d = SIZES[mode];
  return {
    mode,
    durationS: intEnv('BENCH_ROUTING_DURATION_S', d.durationS, 1, 3_600),
    sessionsPerS: intEnv('BENCH_ROUTING_SESSIONS_PER_10S', Math.round(d.sessionsPerS * 10), 1, 10_000) / 10,
    rounds: intEnv('BENCH_ROUTING_ROUNDS', d.rounds, 1, 20),
    seed: intEnv('BENCH_ROUTING_SEED', 7, 0, 2 ** 31 - 1),
    intervalMs: intEnv('BENCH_ROUTING_INTERVAL_MS', 250, 50, 60_000),
  };
}

export interface PolicyResult {
  turns: number;
  errors: number;
  ttftMs: Summary;
  totalMs: Summary;
  /** TTFT p99 of each round on its own (each round has its own seeded sessions). */
  ttftP99ByRound: number[];
  /** Share of prompt tokens served from the replicas' prefix caches. */
  cachedShare: number;
  /** Requests per replica (simulated servers' own counts). */
  perReplica: Record<string, number>;
  /** Most requests waiting at once in each replica's queue. */
  maxWaiting: Record<string, number>;
}

export interface RoutingRecord {
  schema: 1;
  mode: Mode;
  command: string;
  startedAt: string;
  wallSeconds: number;
  machine: { cpus: number; cpuModel: string; kernel: string; loadavgAtStart: number[]; loadavgAtEnd: number[] };
  node: string;
  settings: RoutingSettings;
  replicas: readonly EngineSpec[];
  policies: Partial<Record<Policy, PolicyResult>>;
}

function gatewayConfig(policy: Policy, urls: string[], intervalMs: number): Record<string, unknown> {
  const service: Record<string, unknown> = {
    slug: BENCH_SLUG,
    tokens: [{ name: 'bench', sha256: BENCH_TOKEN_SHA256 }],
    queue: { maxRequests: 10_000, maxWaitMs: 600_000 },
    timeouts: { responseHeadersMs: 600_000, bodyIdleMs: 600_000 },
    replicas: { urls, readyPath: '/health', ...(policy === 'fewest-in-flight' ? {} : { load: { preset: 'vllm', intervalMs } }) },
    ...(policy === 'queue-aware+affinity' ? { routing: { affinityHeader: 'X-Session-Id' } } : {}),
  };
  return { listen: { host: '127.0.0.1', port: 0 }, workers: 1, log: { level: 'warn' }, services: [service] };
}

/** One policy, one round: fresh replicas and gateway, the workload, the replicas' counters. */
async function runPolicy(policy: Policy, s: RoutingSettings, round: number, log: (m: string) => void): Promise<{ turns: TurnResult[]; stats: Record<string, EngineStats> }> {
  const children: Child[] = [];
  try {
    const sims = await Promise.all(REPLICAS.map((spec) => startChild(`sim ${spec.name}`, new URL('./sim-model-server.js', import.meta.url), { env: { BENCH_SIM_SPEC: JSON.stringify(spec) } })));
    children.push(...sims);
    const urls = sims.map((c) => `http://127.0.0.1:${c.port}`);
    const gateway = await startChild(`gateway ${policy}`, new URL('./routing-gateway.js', import.meta.url), { env: { BENCH_ROUTING_CONFIG: JSON.stringify(gatewayConfig(policy, urls, s.intervalMs)) } });
    children.push(gateway);
    const sessions = plan({ durationS: s.durationS, sessionsPerS: s.sessionsPerS, seed: s.seed + round });
    log(`routing round ${round + 1}/${s.rounds} ${policy}: ${sessions.length} sessions, ${sessions.reduce((n, x) => n + x.turns.length, 0)} turns over ${s.durationS} s`);
    const turns = await runSessions(`http://127.0.0.1:${gateway.port}/api/v1/services/${BENCH_SLUG}/request/v1/chat/completions`, BENCH_TOKEN, sessions);
    const stats: Record<string, EngineStats> = {};
    for (const [i, c] of sims.entries()) stats[REPLICAS[i]!.name] = (await (await fetch(`http://127.0.0.1:${c.port}/stats`)).json()) as EngineStats;
    return { turns, stats };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

function summarizePolicy(runs: { turns: TurnResult[]; stats: Record<string, EngineStats> }[]): PolicyResult {
  const turns = runs.flatMap((r) => r.turns);
  const ok = turns.filter((t) => t.status === 200 && t.ttftMs >= 0);
  const perReplica: Record<string, number> = {};
  const maxWaiting: Record<string, number> = {};
  let prompt = 0;
  let cached = 0;
  for (const r of runs) {
    for (const [name, st] of Object.entries(r.stats)) {
      perReplica[name] = (perReplica[name] ?? 0) + st.requests;
      maxWaiting[name] = Math.max(maxWaiting[name] ?? 0, st.maxWaiting);
      prompt += st.promptTokens;
      cached += st.cachedTokens;
    }
  }
  return {
    turns: turns.length,
    errors: turns.length - ok.length,
    ttftMs: summarize(ok.map((t) => t.ttftMs)),
    totalMs: summarize(ok.map((t) => t.totalMs)),
    ttftP99ByRound: runs.map((r) => summarize(r.turns.filter((t) => t.status === 200 && t.ttftMs >= 0).map((t) => t.ttftMs)).p99),
    cachedShare: prompt === 0 ? 0 : cached / prompt,
    perReplica,
    maxWaiting,
  };
}

const BEGIN = '<!-- routing:begin (written by `npm run bench -- routing`) -->';
const END = '<!-- routing:end -->';

/** `text` with the routing section of `old` (a previous BENCHMARKS.md) kept at its end, if it had one. */
export function keepRoutingSection(text: string, old: string | undefined): string {
  const section = old === undefined ? undefined : routingSection(old);
  return section === undefined ? text : `${text.trimEnd()}\n\n${section}\n`;
}

function routingSection(text: string): string | undefined {
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  return begin < 0 || end < begin ? undefined : text.slice(begin, end + END.length);
}

function withSection(old: string | undefined, section: string): string {
  if (old === undefined) return `# Sluice benchmarks\n\n${section}\n`;
  const begin = old.indexOf(BEGIN);
  const end = old.indexOf(END);
  if (begin < 0 || end < begin) return `${old.trimEnd()}\n\n${section}\n`;
  return `${old.slice(0, begin)}${section}${old.slice(end + END.length)}`;
}

const ms = (v: number): string => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '–');

export function routingMarkdown(rec: RoutingRecord, chart: string): string {
  const s = rec.settings;
  const out = [
    BEGIN,
    '## Routing: fewest in flight, queue-aware, queue-aware + affinity',
    '',
    `Generated by \`${rec.command}\` (${rec.mode} mode) on ${rec.startedAt.slice(0, 10)}, ${rec.startedAt.slice(11, 16)} UTC, in ${Math.round(rec.wallSeconds)} s; ${rec.machine.cpus} × ${rec.machine.cpuModel}, Linux ${rec.machine.kernel}, Node ${rec.node}; load average ${rec.machine.loadavgAtStart.map((l) => l.toFixed(2)).join(' ')} at start, ${rec.machine.loadavgAtEnd.map((l) => l.toFixed(2)).join(' ')} at the end.`,
    '',
    `Three simulated batching model servers (\`bench/sim-model-server.ts\`) of uneven speeds behind the real gateway (\`workers: 1\`), a fresh set per policy and round: ${rec.replicas.map((r) => `**${r.name}** (batch ${r.batch}, ${r.decodeMs} ms per decode step +${Math.round(r.batchSlowdown * 100)} % per extra sequence, prefill ${r.prefillMsPer1k} ms per 1,000 uncached tokens, KV cache ${r.kvTokens.toLocaleString('en-US')} tokens)`).join(', ')}. Workload: multi-turn chat sessions starting over ${s.durationS} s at ${s.sessionsPerS} per second, 3 to 6 turns each, 0.3 to 1.5 s apart, each prompt the whole conversation so far (600 to 1,500 tokens of context, growing), 60 to 160 tokens out; the same seeded sessions for every policy; ${s.rounds} round(s), policies interleaved, requests pooled. Load readings every ${s.intervalMs} ms. Time to first token (TTFT) and completion are measured by the client, from sending the request.`,
    '',
    '| policy | turns | errors | TTFT p50 ms | TTFT p99 ms [per round] | completion p50 ms | completion p99 ms | prefix-cache share | requests per replica (most queued) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const p of POLICIES) {
    const r = rec.policies[p];
    if (r === undefined) continue;
    const spread = Object.entries(r.perReplica)
      .map(([name, n]) => `${name} ${n} (${r.maxWaiting[name] ?? 0})`)
      .join(', ');
    out.push(`| ${p} | ${r.turns} | ${r.errors} | ${ms(r.ttftMs.p50)} | ${ms(r.ttftMs.p99)} [${r.ttftP99ByRound.map(ms).join(', ')}] | ${ms(r.totalMs.p50)} | ${ms(r.totalMs.p99)} | ${Math.round(r.cachedShare * 100)} % | ${spread} |`);
  }
  const base = rec.policies['fewest-in-flight'];
  const aware = rec.policies['queue-aware'];
  if (base !== undefined && aware !== undefined) {
    const change = (from: number, to: number): string => {
      const cut = 1 - to / from;
      return `${cut >= 0 ? '−' : '+'}${Math.abs(Math.round(cut * 100))} %`;
    };
    const byRound = (other: PolicyResult): string => base.ttftP99ByRound.map((b, i) => change(b, other.ttftP99ByRound[i] ?? Number.NaN)).join(', ');
    const affinity = rec.policies['queue-aware+affinity'];
    out.push(
      '',
      `Queue-aware vs fewest in flight, TTFT p99: ${ms(base.ttftMs.p99)} → ${ms(aware.ttftMs.p99)} ms (${change(base.ttftMs.p99, aware.ttftMs.p99)}; per round ${byRound(aware)})` +
        (affinity === undefined ? '.' : `; with affinity ${ms(affinity.ttftMs.p99)} ms (${change(base.ttftMs.p99, affinity.ttftMs.p99)}; per round ${byRound(affinity)}).`) +
        ' Rounds differ in their seeded sessions, and a round whose sessions overload the three servers has every policy\'s tail in its queues.',
    );
  }
  out.push('', `![TTFT and completion time per policy](${chart})`, '', 'Per-request figures and settings: `results/routing.json`.', END);
  return out.join('\n');
}

/** Runs the simulation and writes its outputs; resolves with the record. */
export async function runRouting(mode: Mode, outDir: string, command: string, log: (m: string) => void): Promise<RoutingRecord> {
  const s = routingSettings(mode);
  const started = Date.now();
  const rec: RoutingRecord = {
    schema: 1,
    mode,
    command,
    startedAt: new Date(started).toISOString(),
    wallSeconds: 0,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', kernel: release(), loadavgAtStart: loadavg(), loadavgAtEnd: [] },
    node: process.version,
    settings: s,
    replicas: REPLICAS,
    policies: {},
  };
  const runs = new Map<Policy, { turns: TurnResult[]; stats: Record<string, EngineStats> }[]>();
  for (let round = 0; round < s.rounds; round++) {
    // Interleaved, the first policy rotating: a machine that slows down mid-run does not favour one.
    const order = POLICIES.map((_, i) => POLICIES[(i + round) % POLICIES.length]!);
    for (const policy of order) {
      const run = await runPolicy(policy, s, round, log);
      (runs.get(policy) ?? runs.set(policy, []).get(policy)!).push(run);
      const r = summarizePolicy([run]);
      log(`routing round ${round + 1} ${policy}: TTFT p50 ${ms(r.ttftMs.p50)} / p99 ${ms(r.ttftMs.p99)} ms, completion p99 ${ms(r.totalMs.p99)} ms, ${r.errors} errors, prefix cache ${Math.round(r.cachedShare * 100)} %`);
    }
  }
  for (const [policy, list] of runs) rec.policies[policy] = summarizePolicy(list);
  rec.machine.loadavgAtEnd = loadavg();
  rec.wallSeconds = Math.round((Date.now() - started) / 100) / 10;

  mkdirSync(join(outDir, 'results'), { recursive: true });
  const rows = POLICIES.filter((p) => rec.policies[p] !== undefined).map((p) => {
    const r = rec.policies[p]!;
    return { label: p, values: { ttft50: r.ttftMs.p50, ttft99: r.ttftMs.p99, total50: r.totalMs.p50, total99: r.totalMs.p99 } };
  });
  const series = [
    { key: 'ttft50', label: 'TTFT p50', color: '#2b6cb0' },
    { key: 'ttft99', label: 'TTFT p99', color: '#68a0d8' },
    { key: 'total50', label: 'completion p50', color: '#c05621' },
    { key: 'total99', label: 'completion p99', color: '#f0a46e' },
  ];
  writeFileSync(join(outDir, 'results', 'routing.svg'), barsSvg('Time to first token and completion per routing policy (ms)', 'ms', series, rows));
  writeFileSync(join(outDir, 'results', 'routing.json'), `${JSON.stringify(rec, null, 2)}\n`);
  const file = join(outDir, 'BENCHMARKS.md');
  const section = routingMarkdown(rec, 'results/routing.svg');
  writeFileSync(file, withSection(existsSync(file) ? readFileSync(file, 'utf8') : undefined, section));
  process.stdout.write(`\n${section}\n`);
  return rec;
}
