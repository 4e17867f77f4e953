// What the pool benchmark (bench/pool-swaps.ts) derives from the replicas' journals
// (bench/pool-replica.ts) and the client's stamps, all on CLOCK_MONOTONIC: each replica's life,
// each swap (a start on units another model's replica held and gave back), and what a swap added
// beyond the replicas' own work:
//
//   free      the later of: the request that caused the start was sent; the evicted replica's
//             last answer ended (before that, waiting is not the pool's to cut: nothing in
//             flight is ever stopped)
//   added  =  (first token at the client − free)
//             − (evicted replica: SIGTERM → exit)      its own shutdown
//             − (new replica: process start → listening) its own load
//             − (new replica: request received → first token written)
//          =  free → SIGTERM  +  exit → next process start  +  listening → request received
//             +  first token written → read by the client
//
// A cold start (units free, nobody evicted) is the same without the evicted replica's part.
import { type Summary, summarize } from './stats.js';
import type { RequestResult } from './pool-trace.js';

interface JournalLine {
  e: string;
  m: string;
  pid: number;
  u: string;
  t: number;
  id?: number;
}

export interface ReplicaLife {
  model: string;
  pid: number;
  units: string[];
  start: number;
  listening?: number;
  sigterm?: number;
  exit?: number;
  recv: Map<number, number>;
  first: Map<number, number>;
  done: number[];
}

/** The journal's lines, by replica process. */
export function lives(journal: string): ReplicaLife[] {
  const byPid = new Map<number, ReplicaLife>();
  for (const line of journal.split('\n')) {
    if (line === '') continue;
    const j = JSON.parse(line) as JournalLine;
    let r = byPid.get(j.pid);
    if (r === undefined) {
      r = { model: j.m, pid: j.pid, units: j.u.split(',').filter((u) => u !== ''), start: Number.NaN, recv: new Map(), first: new Map(), done: [] };
      byPid.set(j.pid, r);
    }
    if (j.e === 'start') r.start = j.t;
    else if (j.e === 'listening') r.listening = j.t;
    else if (j.e === 'sigterm') r.sigterm = j.t;
    else if (j.e === 'exit') r.exit = j.t;
    else if (j.e === 'recv') r.recv.set(j.id!, j.t);
    else if (j.e === 'first') r.first.set(j.id!, j.t);
    else if (j.e === 'done') r.done.push(j.t);
  }
  return [...byPid.values()].sort((a, b) => a.start - b.start);
}

/** One start of a replica, for a request, with or without another model's replica evicted for it. */
export interface Start {
  model: string;
  pid: number;
  units: string[];
  /** The request that caused it (the earliest sent of those it served). */
  request: number;
  /** The evicted replica (a swap), or undefined (units were free: a cold start). */
  evicted?: { model: string; pid: number };
  /** ms: the replicas' own work (evicted's shutdown, new one's load, its first token). */
  exitMs: number;
  loadMs: number;
  firstTokenMs: number;
  /** ms the gateway added, and its parts (see the file's comment). */
  addedMs: number;
  parts: { decideMs: number; exitToSpawnMs: number; readyToRequestMs: number; relayMs: number };
  /** ms from the request's sending to its first token (its TTFT). */
  ttftMs: number;
}

/** Every start that served a request, matched with the replica it replaced on its units. */
export function starts(replicas: readonly ReplicaLife[], results: readonly RequestResult[]): Start[] {
  const byId = new Map(results.map((r) => [r.id, r]));
  const out: Start[] = [];
  for (const r of replicas) {
    if (r.listening === undefined || r.recv.size === 0) continue;
    let cause: RequestResult | undefined;
    for (const id of r.recv.keys()) {
      const q = byId.get(id);
      if (q !== undefined && Number.isFinite(q.firstTokenAt) && (cause === undefined || q.sentAt < cause.sentAt)) cause = q;
    }
    if (cause === undefined || cause.sentAt > r.start) continue; // started for nothing we sent (min) or served only later requests
    // The evicted one: the last replica on one of these units that exited before this one started.
    let evicted: ReplicaLife | undefined;
    for (const o of replicas) {
      if (o === r || o.exit === undefined || o.sigterm === undefined || o.exit > r.start || !o.units.some((u) => r.units.includes(u))) continue;
      if (evicted === undefined || o.exit > evicted.exit!) evicted = o;
    }
    // …and only if nothing else started on those units since (then the units were free before).
    if (evicted !== undefined && replicas.some((o) => o !== r && o.start > evicted!.exit! && o.start < r.start && o.units.some((u) => r.units.includes(u)))) evicted = undefined;
    const recv = r.recv.get(cause.id)!;
    const written = r.first.get(cause.id) ?? recv;
    const loadMs = r.listening - r.start;
    const firstTokenMs = written - recv;
    let free = cause.sentAt;
    let exitMs = 0;
    let decideMs = 0;
    let exitToSpawnMs = r.start - cause.sentAt;
    if (evicted !== undefined) {
      const lastDone = evicted.done.filter((t) => t <= evicted.sigterm!).reduce((a, b) => Math.max(a, b), evicted.listening ?? evicted.start);
      free = Math.max(cause.sentAt, lastDone);
      exitMs = evicted.exit! - evicted.sigterm!;
      decideMs = evicted.sigterm! - free;
      exitToSpawnMs = r.start - evicted.exit!;
    }
    const parts = { decideMs, exitToSpawnMs, readyToRequestMs: recv - r.listening, relayMs: cause.firstTokenAt - written };
    out.push({
      model: r.model,
      pid: r.pid,
      units: r.units,
      request: cause.id,
      ...(evicted === undefined ? {} : { evicted: { model: evicted.model, pid: evicted.pid } }),
      exitMs,
      loadMs,
      firstTokenMs,
      addedMs: cause.firstTokenAt - free - exitMs - loadMs - firstTokenMs,
      parts,
      ttftMs: cause.firstTokenAt - cause.sentAt,
    });
  }
  return out;
}

/** A request answered in full: 200, every token, then `[DONE]`. */
function answered(r: RequestResult): boolean {
  return r.status === 200 && r.tokens === r.expected && r.done;
}

export interface PolicyFigures {
  requests: number;
  /** Requests not answered in full (status, missing tokens, no [DONE]). */
  lost: number;
  statuses: Record<string, number>;
  /** sluice_pool_evictions_total at the end, summed over pools and services. */
  evictions: number;
  /** Starts that replaced another model's replica (from the journals), and starts on free units. */
  swaps: number;
  coldStarts: number;
  /** What each swap added beyond the replicas' own exit, load and first token (ms). */
  swapAddedMs: Summary;
  /** Medians of its parts. */
  swapParts: { decideMs: number; exitToSpawnMs: number; readyToRequestMs: number; relayMs: number };
  coldAddedMs: Summary;
  /** The replicas' own work, medians (ms). */
  replicaExitMs: number;
  replicaLoadMs: number;
  /** Time to first token of every answered request, and per model (ms). */
  ttftMs: Summary;
  ttftByModel: Record<string, Summary>;
  /** Requests that waited for a start of their model (sent while none of its replicas was ready). */
  waitedForStart: number;
  /** The most requests of one model sent and not yet answered at once. */
  mostAtOnce: number;
}

/** The most requests of one model between their sending and their end at once. */
function mostAtOnce(results: readonly RequestResult[]): number {
  let most = 0;
  for (const model of new Set(results.map((r) => r.model))) {
    const edges = results.filter((r) => r.model === model).flatMap((r) => [{ t: r.sentAt, d: 1 }, { t: r.endAt, d: -1 }]);
    edges.sort((a, b) => a.t - b.t || a.d - b.d);
    let open = 0;
    for (const e of edges) most = Math.max(most, (open += e.d));
  }
  return most;
}

const med = (xs: number[]): number => summarize(xs).p50;

export function figures(results: readonly RequestResult[], replicas: readonly ReplicaLife[], evictions: number): { figures: PolicyFigures; starts: Start[] } {
  const all = starts(replicas, results);
  const swaps = all.filter((s) => s.evicted !== undefined);
  const cold = all.filter((s) => s.evicted === undefined);
  const ok = results.filter(answered);
  const statuses: Record<string, number> = {};
  for (const r of results) statuses[String(r.status)] = (statuses[String(r.status)] ?? 0) + 1;
  const ttftByModel: Record<string, Summary> = {};
  for (const model of [...new Set(results.map((r) => r.model))].sort()) ttftByModel[model] = summarize(ok.filter((r) => r.model === model).map((r) => r.firstTokenAt - r.sentAt));
  const readyAt = (model: string, t: number): boolean => replicas.some((x) => x.model === model && x.listening !== undefined && x.listening <= t && (x.sigterm === undefined || x.sigterm > t));
  return {
    starts: all,
    figures: {
      requests: results.length,
      lost: results.length - ok.length,
      statuses,
      evictions,
      swaps: swaps.length,
      coldStarts: cold.length,
      swapAddedMs: summarize(swaps.map((s) => s.addedMs)),
      swapParts: {
        decideMs: med(swaps.map((s) => s.parts.decideMs)),
        exitToSpawnMs: med(swaps.map((s) => s.parts.exitToSpawnMs)),
        readyToRequestMs: med(swaps.map((s) => s.parts.readyToRequestMs)),
        relayMs: med(swaps.map((s) => s.parts.relayMs)),
      },
      coldAddedMs: summarize(cold.map((s) => s.addedMs)),
      replicaExitMs: med(swaps.map((s) => s.exitMs)),
      replicaLoadMs: med(all.map((s) => s.loadMs)),
      ttftMs: summarize(ok.map((r) => r.firstTokenAt - r.sentAt)),
      ttftByModel,
      waitedForStart: results.filter((r) => !readyAt(r.model, r.sentAt)).length,
      mostAtOnce: mostAtOnce(results),
    },
  };
}
