// How many CPUs this process may really use: the smaller of the CPUs it may run on
// (`os.availableParallelism()`, which follows the affinity mask and cpuset) and its cgroup CPU
// quota. Inside a container started with `--cpus=2` on a 64-core host, Node sees 64 CPUs but the
// kernel lets the container use two; one worker per host CPU would only add contention.
//
// cgroup v2: `cpu.max` holds "<quota> <period>" in microseconds, or "max <period>" for no limit;
// a limit on any ancestor cgroup applies too, so the smallest along the path wins.
// cgroup v1: `cpu.cfs_quota_us` (-1 = no limit) and `cpu.cfs_period_us` in the cpu controller.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { posix } from 'node:path';

export interface CpuCountSources {
  /** Where the cgroup file systems are mounted (default `/sys/fs/cgroup`). */
  cgroupRoot?: string;
  /** The text of `/proc/self/cgroup` (default: read it). */
  procSelfCgroup?: string;
  /** The CPUs the process may run on (default `os.availableParallelism()`). */
  parallelism?: number;
}

/** The CPUs this process may use: at least 1, at most `os.availableParallelism()`, within the cgroup quota. */
export function availableCpus(sources: CpuCountSources = {}): number {
  const parallelism = Math.max(1, Math.floor(sources.parallelism ?? availableParallelism()));
  const quota = cgroupCpuLimit(sources.cgroupRoot ?? '/sys/fs/cgroup', sources.procSelfCgroup ?? readText('/proc/self/cgroup') ?? '');
  if (quota === undefined) return parallelism;
  // A quota of 1.5 CPUs can keep two threads busy part of the time: round up.
  return Math.max(1, Math.min(parallelism, Math.ceil(quota)));
}

/** `workers: 0` means one front-end worker per CPU the process may use; any other value is kept. */
export function resolveWorkers(workers: number, sources?: CpuCountSources): number {
  return workers === 0 ? availableCpus(sources) : workers;
}

/** The CPU quota in CPUs (e.g. 1.5), or undefined when there is none or it cannot be read. */
export function cgroupCpuLimit(root: string, procSelfCgroup: string): number | undefined {
  const memberships = parseProcSelfCgroup(procSelfCgroup);
  const v2 = memberships.find((m) => m.hierarchy === '0' && m.controllers === '');
  if (v2 !== undefined) {
    const limit = minOf(dirsUpToRoot(root, v2.path).map((dir) => readCpuMax(posix.join(dir, 'cpu.max'))));
    if (limit !== undefined) return limit;
  }
  const v1 = memberships.find((m) => m.controllers.split(',').includes('cpu'));
  const v1Path = v1?.path ?? '/';
  const v1Dirs = [...new Set([v1?.controllers, 'cpu,cpuacct', 'cpuacct,cpu', 'cpu'].filter((d): d is string => d !== undefined && d !== ''))];
  for (const controllerDir of v1Dirs) {
    // Without a cgroup namespace, a container sees its host path in /proc/self/cgroup but has its
    // own cgroup mounted at the controller's root: try the path, then the root.
    const base = posix.join(root, controllerDir);
    const limit = minOf([...new Set([posix.join(base, v1Path), base])].map(readCfsQuota));
    if (limit !== undefined) return limit;
  }
  // A cgroup v2 file system mounted with no /proc/self/cgroup to say where we are (or a
  // container with its own namespace): the root's cpu.max.
  if (memberships.length === 0) return readCpuMax(posix.join(root, 'cpu.max'));
  return undefined;
}

interface Membership {
  hierarchy: string;
  controllers: string;
  path: string;
}

/** `0::/docker/abc` and `4:cpu,cpuacct:/docker/abc` lines. */
function parseProcSelfCgroup(text: string): Membership[] {
  const out: Membership[] = [];
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const path = line.slice(second + 1).trim();
    if (!path.startsWith('/')) continue;
    out.push({ hierarchy: line.slice(0, first), controllers: line.slice(first + 1, second), path });
  }
  return out;
}

/** `root/a/b`, `root/a`, `root` for the cgroup path `/a/b` (never above root). */
function dirsUpToRoot(root: string, cgroupPath: string): string[] {
  const parts = cgroupPath.split('/').filter((p) => p !== '' && p !== '.' && p !== '..');
  const dirs: string[] = [];
  for (let n = parts.length; n >= 0; n--) dirs.push(posix.join(root, ...parts.slice(0, n)));
  return dirs;
}

function readCpuMax(file: string): number | undefined {
  const text = readText(file);
  if (text === undefined) return undefined;
  const [quota, period] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max') return undefined;
  return ratio(quota, period ?? '100000');
}

function readCfsQuota(dir: string): number | undefined {
  const quota = readText(posix.join(dir, 'cpu.cfs_quota_us'))?.trim();
  const period = readText(posix.join(dir, 'cpu.cfs_period_us'))?.trim();
  if (quota === undefined || period === undefined || quota.startsWith('-')) return undefined;
  return ratio(quota, period);
}

function ratio(quota: string, period: string): number | undefined {
  if (!/^\d+$/.test(quota) || !/^\d+$/.test(period)) return undefined;
  const q = Number(quota);
  const p = Number(period);
  return q > 0 && p > 0 ? q / p : undefined;
}

function minOf(values: (number | undefined)[]): number | undefined {
  let min: number | undefined;
  for (const v of values) if (v !== undefined && (min === undefined || v < min)) min = v;
  return min;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
