// Reads a V8 .cpuprofile (from `node --cpu-prof`) and tells where the time went: the functions
// with the most self time, and the share of each part of the stack (Sluice, undici, uWS, pino,
// Node internals, GC). Used by profile.ts; also runs alone:
//   node dist/bench/cpuprofile.js FILE.cpuprofile [TOP]
// Sample timestamps are microseconds of CLOCK_MONOTONIC, the clock of process.hrtime, so a window
// measured by another process (the load's start and end) selects the samples taken under load.
import { readFileSync, realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface HotSpot {
  name: string;
  /** `file:line` (1-based), shortened to the part after node_modules/ or the repo. */
  where: string;
  category: string;
  selfMs: number;
  /** Share of the window's busy time (everything but idle), %. */
  selfPct: number;
}

export interface ProfileSummary {
  /** Milliseconds covered by the samples analysed. */
  windowMs: number;
  /** Of which not idle. */
  busyMs: number;
  samples: number;
  top: HotSpot[];
  /** Self time per category, ms, largest first. */
  categories: { category: string; selfMs: number; selfPct: number }[];
}

/** Which part of the process a frame belongs to. */
export function categorize(frame: CallFrame): string {
  const { functionName: fn, url } = frame;
  if (url === '') {
    if (fn === '(garbage collector)') return 'GC';
    if (fn === '(idle)') return 'idle';
    if (fn === '(program)') return 'program (V8/native, no JS frame)';
    if (fn === '(root)') return 'root';
    return 'native functions (uWS, V8 builtins)';
  }
  if (url.includes('/node_modules/undici/')) return 'undici';
  if (/\/node_modules\/(pino|sonic-boom|thread-stream|fast-redact|@pinojs|quick-format-unescaped|on-exit-leak-free|atomic-sleep|safe-stable-stringify|real-require)/.test(url)) {
    return 'pino (logging)';
  }
  if (url.includes('uWebSockets.js') || url.includes('uws-pack')) return 'uWS (JS wrapper)';
  if (url.includes('/node_modules/prom-client/') || url.includes('/node_modules/tdigest') || url.includes('/node_modules/bintrees')) return 'prom-client (metrics)';
  if (url.includes('/node_modules/')) return 'other dependencies';
  if (url.includes('/dist/src/') || url.includes('/src/')) return 'sluice';
  if (url.includes('/dist/bench/')) return 'bench harness';
  if (url.startsWith('node:')) return 'node internals';
  return 'other';
}

function shortWhere(frame: CallFrame): string {
  if (frame.url === '') return '(native)';
  let file = frame.url.replace(/^file:\/\//, '');
  const nm = file.lastIndexOf('/node_modules/');
  if (nm >= 0) file = file.slice(nm + '/node_modules/'.length);
  else {
    const dist = file.indexOf('/dist/');
    if (dist >= 0) file = file.slice(dist + 1);
  }
  return `${file}:${frame.lineNumber + 1}`;
}

/**
 * Self time per function (by name and location), within [fromUs, toUs] if given (µs of the
 * monotonic clock; a window that misses the profile is ignored and the whole profile is used).
 */
export function summarizeProfile(profile: CpuProfile, top = 10, fromUs?: number, toUs?: number): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) byId.set(node.id, node);
  let from = fromUs ?? Number.NEGATIVE_INFINITY;
  let to = toUs ?? Number.POSITIVE_INFINITY;
  if (from > profile.endTime || to < profile.startTime) {
    from = Number.NEGATIVE_INFINITY;
    to = Number.POSITIVE_INFINITY;
  }
  const self = new Map<number, number>();
  let t = profile.startTime;
  let count = 0;
  let windowUs = 0;
  // Sample i lasts until sample i + 1 (as in Chrome DevTools).
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    const duration = profile.timeDeltas[i + 1] ?? 0;
    if (t < from || t > to) continue;
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + duration);
    windowUs += duration;
    count += 1;
  }
  const spots = new Map<string, { frame: CallFrame; us: number }>();
  const categories = new Map<string, number>();
  let idleUs = 0;
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    const category = categorize(frame);
    if (category === 'idle') {
      idleUs += us;
      continue;
    }
    categories.set(category, (categories.get(category) ?? 0) + us);
    const key = `${frame.functionName}\u0000${frame.url}\u0000${frame.lineNumber}`;
    const spot = spots.get(key);
    if (spot === undefined) spots.set(key, { frame, us });
    else spot.us += us;
  }
  const busyUs = windowUs - idleUs;
  const pct = (us: number): number => (busyUs > 0 ? (us / busyUs) * 100 : 0);
  return {
    windowMs: windowUs / 1000,
    busyMs: busyUs / 1000,
    samples: count,
    top: [...spots.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map(({ frame, us }) => ({
        name: frame.functionName || '(anonymous)',
        where: shortWhere(frame),
        category: categorize(frame),
        selfMs: us / 1000,
        selfPct: pct(us),
      })),
    categories: [...categories.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([category, us]) => ({ category, selfMs: us / 1000, selfPct: pct(us) })),
  };
}

export function readProfile(file: string): CpuProfile {
  return JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
}

export function formatSummary(s: ProfileSummary): string {
  const lines: string[] = [];
  lines.push(
    `${s.samples} samples over ${(s.windowMs / 1000).toFixed(1)} s; busy ${(s.busyMs / 1000).toFixed(1)} s (${((s.busyMs / Math.max(s.windowMs, 1e-9)) * 100).toFixed(0)}% of one core); shares below are of busy time`,
  );
  lines.push('', `Top ${s.top.length} functions by self time`);
  const w = Math.max(...s.top.map((h) => h.name.length), 8);
  const ww = Math.max(...s.top.map((h) => h.where.length), 5);
  s.top.forEach((h, i) => {
    lines.push(
      `${String(i + 1).padStart(3)}. ${h.selfPct.toFixed(1).padStart(5)}%  ${h.selfMs.toFixed(0).padStart(6)} ms  ${h.name.padEnd(w)}  ${h.where.padEnd(ww)}  ${h.category}`,
    );
  });
  lines.push('', 'Self time by part of the stack');
  for (const c of s.categories) lines.push(`  ${c.selfPct.toFixed(1).padStart(5)}%  ${c.selfMs.toFixed(0).padStart(6)} ms  ${c.category}`);
  return lines.join('\n');
}

function isEntryPoint(): boolean {
  const argv1 = process.argv[1];
  if (argv1 === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(argv1)).href;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  const [file, top] = process.argv.slice(2);
  if (file === undefined) {
    process.stderr.write('usage: node dist/bench/cpuprofile.js FILE.cpuprofile [TOP]\n');
    process.exit(2);
  }
  process.stdout.write(`${formatSummary(summarizeProfile(readProfile(file), Number(top ?? 15)))}\n`);
}
