// What Linux says about a process: resident memory and CPU time (from /proc; undefined elsewhere).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** A `kB` field of /proc/<pid>/status (`VmRSS`, `VmHWM`), in MiB. */
export function statusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return match === null ? undefined : Number(match[1]) / 1024;
  } catch {
    return undefined;
  }
}

/** User + system CPU seconds used so far by every thread of the process. */
export function cpuSeconds(pid: number): number | undefined {
  const t = cpuTimes(pid);
  return t === undefined ? undefined : t.user + t.system;
}

/**
 * User and system CPU seconds used so far by every thread of the process, apart (in clock ticks,
 * usually 10 ms each), and `onCpuS`, the time its live threads have run, from the scheduler's
 * nanosecond counters (`/proc/<pid>/task/<tid>/schedstat`): precise where a short run is a few
 * ticks (undefined when the kernel does not keep schedstat).
 */
export function cpuTimes(pid: number): { user: number; system: number; onCpuS: number | undefined } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at field 3 (state).
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { user: Number(fields[11]) / clockTicks(), system: Number(fields[12]) / clockTicks(), onCpuS: onCpuSeconds(pid) };
  } catch {
    return undefined;
  }
}

function onCpuSeconds(pid: number): number | undefined {
  const threads = threadCpu(pid);
  if (threads.size === 0) return undefined;
  let s = 0;
  for (const v of threads.values()) s += v;
  return s;
}

/** Thread id → seconds it has run (scheduler's counters), for every live thread of the process. */
export function threadCpu(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        out.set(Number(tid), Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e9);
      } catch {
        // the thread ended between the listing and the read
      }
    }
  } catch {
    // no /proc: an empty map
  }
  return out;
}
