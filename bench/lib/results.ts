// The run's record (written as JSON) and the figures derived from it: medians across rounds,
// differences and ratios taken within each round, and the targets, met or missed.
import type { ColdStartRun, IdleStreamsRun, SlowReaderRun, ThroughputRun, TokensRun, TtfbRun } from './measure.js';
import type { PeerId, Settings } from './modes.js';
import type { NewStreamsRun } from './new-streams.js';
import type { Framing, HeldUploadsRun, UploadRun } from './uploads.js';
import { median } from './stats.js';

export interface PeerRecord {
  id: PeerId;
  label: string;
  /** Why the peer did not run (nginx unavailable…); absent when it ran. */
  skipped?: string;
}

export interface Record {
  schema: 2;
  mode: Settings['mode'];
  command: string;
  startedAt: string;
  wallSeconds: number;
  machine: { cpuModel: string; cpus: number; kernel: string; memTotalMiB: number; loadavgAtStart: number[]; loadavgAtEnd: number[] };
  node: string;
  /** The version of each system peer that ran (nginx, HAProxy, Caddy). */
  versions: Partial<globalThis.Record<'nginx' | 'haproxy' | 'caddy' | 'uWebSockets.js', string>>;
  settings: Settings;
  peers: PeerRecord[];
  /** Every process the run started (pid), all stopped before it ended. */
  processes: { name: string; pid: number }[];
  scenarios: {
    throughput: { order: PeerId[][]; rounds: Partial<globalThis.Record<PeerId, ThroughputRun[]>> };
    ttfb: { order: PeerId[][]; rounds: Partial<globalThis.Record<PeerId, TtfbRun[]>> };
    tokens: { order: PeerId[][]; rounds: Partial<globalThis.Record<PeerId, TokensRun[]>> };
    tokensFew: { order: PeerId[][]; rounds: Partial<globalThis.Record<PeerId, TokensRun[]>> };
    newStreams: { order: PeerId[][]; rounds: Partial<globalThis.Record<PeerId, NewStreamsRun[]>> };
    slowReader: { peers: Partial<globalThis.Record<PeerId, SlowReaderRun>> };
    idleStreams: { peers: Partial<globalThis.Record<PeerId, IdleStreamsRun>> };
    coldStart: { run: ColdStartRun | null };
    /** Per peer and framing, one run per round. */
    uploads: { order: PeerId[][]; rounds: Partial<globalThis.Record<PeerId, Partial<globalThis.Record<Framing, UploadRun[]>>>> };
    heldUploads: { peers: Partial<globalThis.Record<PeerId, HeldUploadsRun>> };
  };
  derived?: Derived;
}

export function emptyScenarios(): Record['scenarios'] {
  return {
    throughput: { order: [], rounds: {} },
    ttfb: { order: [], rounds: {} },
    tokens: { order: [], rounds: {} },
    tokensFew: { order: [], rounds: {} },
    newStreams: { order: [], rounds: {} },
    slowReader: { peers: {} },
    idleStreams: { peers: {} },
    coldStart: { run: null },
    uploads: { order: [], rounds: {} },
    heldUploads: { peers: {} },
  };
}


/** A median across rounds, with the per-round values it came from. */
export interface Figure {
  median: number | null;
  rounds: number[];
}

interface Target {
  name: string;
  goal: string;
  measured: string;
  met: boolean | null;
}

export interface Derived {
  throughput: Partial<globalThis.Record<PeerId, { reqPerS: Figure; cpuUsPerReq: Figure; userUsPerReq: Figure; sysUsPerReq: Figure; cpuPct: Figure; latP50Ms: Figure; latP99Ms: Figure; errors: number; reqVsNginx: Figure; cpuVsNginx: Figure }>>;
  ttfb: Partial<globalThis.Record<PeerId, { p50: Figure; p90: Figure; p99: Figure; p999: Figure; addedP50: Figure; addedP99: Figure }>>;
  tokens: Partial<globalThis.Record<PeerId, TokensFigures>>;
  tokensFew: Partial<globalThis.Record<PeerId, TokensFigures>>;
  newStreams: Partial<globalThis.Record<PeerId, NewStreamsFigures>>;
  ratios: { name: string; value: Figure }[];
  targets: Target[];
}

export interface TokensFigures {
  p50: Figure;
  p90: Figure;
  p99: Figure;
  addedP50: Figure;
  addedP99: Figure;
  cpuUsPerToken: Figure;
  userUsPerToken: Figure;
  sysUsPerToken: Figure;
  cpuVsNginx: Figure;
  /** Streams cut short, over every round. */
  incompleteStreams: number;
}

export interface NewStreamsFigures {
  cpuUsPerStream: Figure;
  userUsPerStream: Figure;
  sysUsPerStream: Figure;
  cpuUsPerToken: Figure;
  cpuVsNginx: Figure;
  /** Streams that did not end cleanly with every token, over every round. */
  incompleteStreams: number;
}

function figure(values: readonly (number | null | undefined)[]): Figure {
  const rounds = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return { median: rounds.length === 0 ? null : median(rounds), rounds };
}

/** f(a[i], b[i]) for each round both ran, then the median. */
function paired<T>(a: T[] | undefined, b: T[] | undefined, f: (x: T, y: T) => number | null): Figure {
  if (a === undefined || b === undefined) return figure([]);
  const n = Math.min(a.length, b.length);
  return figure(Array.from({ length: n }, (_, i) => f(a[i]!, b[i]!)));
}

const ratio = (x: number | null, y: number | null): number | null => (x === null || y === null || y <= 0 ? null : x / y);

/** Per peer: delivery percentiles, added over direct and CPU per token vs nginx, within each round. */
function tokenFigures(all: Partial<globalThis.Record<PeerId, TokensRun[]>>): Partial<globalThis.Record<PeerId, TokensFigures>> {
  const out: Partial<globalThis.Record<PeerId, TokensFigures>> = {};
  const direct = all['direct'];
  const nginx = all['nginx'];
  for (const [id, runs] of Object.entries(all) as [PeerId, TokensRun[]][]) {
    out[id] = {
      p50: figure(runs.map((r) => r.deliveryP50Us)),
      p90: figure(runs.map((r) => r.deliveryP90Us)),
      p99: figure(runs.map((r) => r.deliveryP99Us)),
      addedP50: id === 'direct' ? figure([]) : paired(runs, direct, (x, y) => x.deliveryP50Us - y.deliveryP50Us),
      addedP99: id === 'direct' ? figure([]) : paired(runs, direct, (x, y) => x.deliveryP99Us - y.deliveryP99Us),
      cpuUsPerToken: figure(runs.map((r) => r.relayCpuUsPerToken)),
      userUsPerToken: figure(runs.map((r) => r.relayUserUsPerToken)),
      sysUsPerToken: figure(runs.map((r) => r.relaySysUsPerToken)),
      cpuVsNginx: id === 'direct' ? figure([]) : paired(runs, nginx, (x, y) => ratio(x.relayCpuUsPerToken, y.relayCpuUsPerToken)),
      incompleteStreams: runs.reduce((n, r) => n + (r.incompleteStreams ?? 0), 0),
    };
  }
  return out;
}

/** Per peer: relay CPU per stream set up, and ÷ nginx's within each round. */
function newStreamFigures(all: Partial<globalThis.Record<PeerId, NewStreamsRun[]>>): Partial<globalThis.Record<PeerId, NewStreamsFigures>> {
  const out: Partial<globalThis.Record<PeerId, NewStreamsFigures>> = {};
  const nginx = all['nginx'];
  for (const [id, runs] of Object.entries(all) as [PeerId, NewStreamsRun[]][]) {
    out[id] = {
      cpuUsPerStream: figure(runs.map((r) => r.relayCpuUsPerStream)),
      userUsPerStream: figure(runs.map((r) => r.relayUserUsPerStream)),
      sysUsPerStream: figure(runs.map((r) => r.relaySysUsPerStream)),
      cpuUsPerToken: figure(runs.map((r) => r.relayCpuUsPerToken)),
      cpuVsNginx: id === 'direct' ? figure([]) : paired(runs, nginx, (x, y) => ratio(x.relayCpuUsPerStream, y.relayCpuUsPerStream)),
      incompleteStreams: runs.reduce((n, r) => n + r.streams - r.completed, 0),
    };
  }
  return out;
}

export function derive(rec: Record): Derived {
  const { throughput: tp, ttfb: tt, tokens: tk } = rec.scenarios;
  const d: Derived = { throughput: {}, ttfb: {}, tokens: {}, tokensFew: {}, newStreams: {}, ratios: [], targets: [] };
  const nginxTp = tp.rounds['nginx'];
  for (const [id, runs] of Object.entries(tp.rounds) as [PeerId, ThroughputRun[]][]) {
    d.throughput[id] = {
      reqPerS: figure(runs.map((r) => r.reqPerS)),
      cpuUsPerReq: figure(runs.map((r) => r.relayCpuUsPerReq)),
      userUsPerReq: figure(runs.map((r) => r.relayUserUsPerReq)),
      sysUsPerReq: figure(runs.map((r) => r.relaySysUsPerReq)),
      cpuPct: figure(runs.map((r) => r.relayCpuPct)),
      latP50Ms: figure(runs.map((r) => r.latencyP50Ms)),
      latP99Ms: figure(runs.map((r) => r.latencyP99Ms)),
      errors: runs.reduce((n, r) => n + r.errors, 0),
      reqVsNginx: paired(runs, nginxTp, (x, y) => ratio(x.reqPerS, y.reqPerS)),
      cpuVsNginx: paired(runs, nginxTp, (x, y) => ratio(x.relayCpuUsPerReq, y.relayCpuUsPerReq)),
    };
  }
  for (const [id, runs] of Object.entries(tt.rounds) as [PeerId, TtfbRun[]][]) {
    const direct = tt.rounds['direct'];
    d.ttfb[id] = {
      p50: figure(runs.map((r) => r.p50Us)),
      p90: figure(runs.map((r) => r.p90Us)),
      p99: figure(runs.map((r) => r.p99Us)),
      p999: figure(runs.map((r) => r.p999Us)),
      addedP50: id === 'direct' ? figure([]) : paired(runs, direct, (x, y) => x.p50Us - y.p50Us),
      addedP99: id === 'direct' ? figure([]) : paired(runs, direct, (x, y) => x.p99Us - y.p99Us),
    };
  }
  d.tokens = tokenFigures(tk.rounds);
  d.tokensFew = tokenFigures(rec.scenarios.tokensFew.rounds);
  d.newStreams = newStreamFigures(rec.scenarios.newStreams?.rounds ?? {});
  const tpRatio = (name: string, a: PeerId, b: PeerId, pick: (r: ThroughputRun) => number | null): void => {
    if (tp.rounds[a] !== undefined && tp.rounds[b] !== undefined) d.ratios.push({ name, value: paired(tp.rounds[a], tp.rounds[b], (x, y) => ratio(pick(x), pick(y))) });
  };
  const rps = (r: ThroughputRun): number => r.reqPerS;
  const cpu = (r: ThroughputRun): number | null => r.relayCpuUsPerReq;
  tpRatio('Sluice info req/s ÷ nginx', 'sluice-info', 'nginx', rps);
  tpRatio('Sluice info relay CPU/req ÷ nginx', 'sluice-info', 'nginx', cpu);
  tpRatio('Sluice warn req/s ÷ nginx', 'sluice-warn', 'nginx', rps);
  tpRatio('Sluice warn relay CPU/req ÷ nginx', 'sluice-warn', 'nginx', cpu);
  tpRatio('Sluice info req/s ÷ HAProxy', 'sluice-info', 'haproxy', rps);
  tpRatio('Sluice info req/s ÷ Caddy', 'sluice-info', 'caddy', rps);
  tpRatio('Sluice info req/s ÷ http-proxy', 'sluice-info', 'http-proxy', rps);
  tpRatio('Sluice info req/s ÷ @fastify/http-proxy', 'sluice-info', 'fastify-proxy', rps);
  tpRatio('Sluice info workers 2 ÷ workers 1, req/s', 'sluice-info-w2', 'sluice-info', rps);
  tpRatio('Sluice info options on ÷ off, req/s', 'sluice-info', 'sluice-info-plain', rps);
  tpRatio('Sluice info options on ÷ off, relay CPU/req', 'sluice-info', 'sluice-info-plain', cpu);
  const tokenRatio = (name: string, runsOf: Partial<globalThis.Record<PeerId, TokensRun[]>>): void => {
    const on = runsOf['sluice-info'];
    const off = runsOf['sluice-info-plain'];
    if (on !== undefined && off !== undefined) d.ratios.push({ name, value: paired(on, off, (x, y) => ratio(x.relayCpuUsPerToken, y.relayCpuUsPerToken)) });
  };
  tokenRatio(`Sluice info options on ÷ off, relay CPU/token (${rec.settings.streams} streams)`, tk.rounds);
  tokenRatio(`Sluice info options on ÷ off, relay CPU/token (${rec.settings.fewStreams} streams)`, rec.scenarios.tokensFew.rounds);
  tpRatio('Sluice info req/s ÷ direct', 'sluice-info', 'direct', rps);
  d.targets = targets(rec, d);
  return d;
}

/** Per round, (Sluice info's TTFB p99 − direct's) ÷ (nginx's − direct's), then the median. */
function addedP99Ratio(rec: Record): number | null {
  const { ttfb } = rec.scenarios;
  const sluice = ttfb.rounds['sluice-info'];
  const nginx = ttfb.rounds['nginx'];
  const direct = ttfb.rounds['direct'];
  if (sluice === undefined || nginx === undefined || direct === undefined) return null;
  const n = Math.min(sluice.length, nginx.length, direct.length);
  return figure(Array.from({ length: n }, (_, i) => ratio(sluice[i]!.p99Us - direct[i]!.p99Us, nginx[i]!.p99Us - direct[i]!.p99Us))).median;
}

function targets(rec: Record, d: Derived): Target[] {
  const out: Target[] = [];
  const ratioOf = (name: string): number | null => d.ratios.find((r) => r.name === name)?.value.median ?? null;
  const check = (name: string, goal: string, value: number | null, limit: number, atMost: boolean, show: (v: number) => string): void => {
    out.push({ name, goal, measured: value === null ? 'not measured' : show(value), met: value === null ? null : atMost ? value <= limit : value >= limit });
  };
  const x = (v: number): string => `${v.toFixed(2)}×`;
  const us = (v: number): string => `${v >= 0 ? '+' : ''}${v.toFixed(0)} µs`;
  const mib = (v: number): string => `${v.toFixed(1)} MiB`;
  check('Sluice info: throughput vs nginx', '≥ 0.95× (goal 1.0×)', ratioOf('Sluice info req/s ÷ nginx'), 0.95, false, x);
  check('Sluice info: relay CPU per request vs nginx', '≤ 1.3×', ratioOf('Sluice info relay CPU/req ÷ nginx'), 1.3, true, x);
  check('Sluice info: added TTFB p99 vs what nginx adds', '≤ 2×', addedP99Ratio(rec), 2, true, x);
  check('Sluice info: throughput vs http-proxy', '≥ 2.5×', ratioOf('Sluice info req/s ÷ http-proxy'), 2.5, false, x);
  const k = d.tokens['sluice-info'];
  const kn = d.tokens['nginx'];
  const s = rec.settings;
  check(`Sluice info: relay CPU per token vs nginx, ${s.streams} streams`, '≤ 1.1×', k?.cpuVsNginx.median ?? null, 1.1, true, x);
  check(`Sluice info: added token delivery p50 vs nginx's, ${s.streams} streams`, "≤ nginx's", k?.addedP50.median == null || kn?.addedP50.median == null ? null : k.addedP50.median - kn.addedP50.median, 0, true, (v) => `${us(v)} over nginx`);
  const cut = k === undefined && d.tokensFew['sluice-info'] === undefined ? null : (k?.incompleteStreams ?? 0) + (d.tokensFew['sluice-info']?.incompleteStreams ?? 0);
  check('Sluice info: token streams cut short', '0', cut, 0, true, (v) => String(v));
  const f = d.tokensFew['sluice-info'];
  check(`Sluice info: relay CPU per token vs nginx, ${s.fewStreams} streams`, '≤ 1.3×', f?.cpuVsNginx.median ?? null, 1.3, true, x);
  const slow = rec.scenarios.slowReader.peers['sluice-info'];
  check(`Sluice info: slow reader RSS growth (${rec.settings.slowBytes / 1048576} MiB at ${rec.settings.slowRateBytesPerS / 1048576} MiB/s)`, '≤ 32 MiB', slow?.growthMiB ?? null, 32, true, mib);
  const idle = rec.scenarios.idleStreams.peers['sluice-info'];
  check(`Sluice info: memory per idle stream (${rec.settings.idleStreams} streams)`, '≤ 16 KiB', idle?.perStreamKiB ?? null, 16, true, (v) => `${v.toFixed(1)} KiB`);
  const cold = rec.scenarios.coldStart.run;
  check(`Cold start: lost requests of ${rec.settings.coldRequests}`, '0', cold?.lost ?? null, 0, true, (v) => String(v));
  check('Cold start: readiness answer → first queued request at the replica', '≤ 20 ms', cold?.readyToFirstRequestMs ?? null, 20, true, (v) => `${v.toFixed(1)} ms`);
  return out;
}
