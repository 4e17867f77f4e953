// What a process paused for, recorded for `bench/pauses.ts`: each garbage collection (start and
// duration on CLOCK_MONOTONIC, the clock every process of the run shares, so the parent can lay
// them over its slow requests) and the event loop's delay histogram. A child records when
// BENCH_PAUSES_FILE is set and writes the file when it stops; the parent records itself.
import { writeFileSync } from 'node:fs';
import { constants, type IntervalHistogram, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

export interface GcPause {
  /** CLOCK_MONOTONIC, µs. */
  startUs: number;
  durationUs: number;
  kind: 'minor' | 'major' | 'incremental' | 'weakcb';
}

export interface Pauses {
  gc: GcPause[];
  /** The event loop's delay (monitorEventLoopDelay, 1 ms resolution), µs. */
  loopDelayP50Us: number;
  loopDelayP99Us: number;
  loopDelayMaxUs: number;
}

function kindOf(kind: number | undefined): GcPause['kind'] {
  switch (kind) {
    case constants.NODE_PERFORMANCE_GC_MAJOR:
      return 'major';
    case constants.NODE_PERFORMANCE_GC_INCREMENTAL:
      return 'incremental';
    case constants.NODE_PERFORMANCE_GC_WEAKCB:
      return 'weakcb';
    default:
      return 'minor';
  }
}

export class PauseRecorder {
  private readonly gc: GcPause[] = [];
  private readonly observer: PerformanceObserver;
  private readonly loop: IntervalHistogram;
  /** CLOCK_MONOTONIC µs at performance.now() = 0. */
  private readonly originUs: number;

  constructor() {
    this.originUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
    this.observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const detail = (e as unknown as { detail?: { kind?: number } }).detail;
        this.gc.push({ startUs: this.originUs + e.startTime * 1000, durationUs: e.duration * 1000, kind: kindOf(detail?.kind) });
      }
    });
    this.observer.observe({ entryTypes: ['gc'] });
    this.loop = monitorEventLoopDelay({ resolution: 1 });
    this.loop.enable();
  }

  /** Forgets what happened so far (the warm-up). */
  reset(): void {
    this.gc.length = 0;
    this.loop.reset();
  }

  stop(): Pauses {
    this.observer.disconnect();
    this.loop.disable();
    const us = (ns: number): number => (Number.isFinite(ns) ? ns / 1000 : 0);
    return { gc: [...this.gc], loopDelayP50Us: us(this.loop.percentile(50)), loopDelayP99Us: us(this.loop.percentile(99)), loopDelayMaxUs: us(this.loop.max) };
  }
}

/**
 * In a child: records when BENCH_PAUSES_FILE is set; `SIGUSR2` forgets the warm-up. Returns the
 * function that writes the file (call it when the child stops), or undefined.
 */
export function recordPausesIfAsked(): (() => void) | undefined {
  const file = process.env['BENCH_PAUSES_FILE'];
  if (file === undefined || file === '') return undefined;
  const recorder = new PauseRecorder();
  process.on('SIGUSR2', () => recorder.reset());
  return () => writeFileSync(file, JSON.stringify(recorder.stop()));
}
