// How long a service's replicas take to start, and when the start in progress should end: the
// control plane's half of the expected start (src/replicas/expected-start.ts, which every thread
// reads). ServiceControl is the one writer; docs/architecture.md#the-expected-start.
//
// - A start is measured from the moment it was asked for to the replica being ready, as its kind
//   reports it (the figure of `sluice_replica_start_seconds{result="ready"}`: a launched replica
//   from its creation, a Kubernetes one from the request that found the service cold). A failed
//   start is not measured.
// - The estimate is the median of the last START_SAMPLES measured starts. A model server's start is
//   mostly loading weights and so much the same each time, but now and then one is far slower (a
//   cold page cache, an image pulled, a busy disk) or faster (a warm cache): the median ignores such
//   a one, where a mean would be dragged by it for the next eight starts; and a window this small
//   follows a real change (a new model, another machine) within a few starts.
// - While the service is cold (no replica ready) the start in progress is expected to end at the
//   time it was asked for plus the estimate; with nothing starting at all, a start asked for now
//   would take the estimate.
import type { ExpectedStart } from '../../replicas/expected-start.js';
import type { ManagedReplica } from './replica.js';
import { START_SAMPLES } from '../../tunables.js';

export class StartEstimate {
  /** The last START_SAMPLES durations (ms), oldest overwritten first. */
  private readonly window: number[] = [];
  private next = 0;
  private estimate = -1;

  constructor(private readonly shared: ExpectedStart) {}

  /** The median of the recent starts in ms (whole), or -1 before any was measured. */
  get estimateMs(): number {
    return this.estimate;
  }

  /** A start took `ms`, from being asked for to the replica being ready. */
  measured(ms: number): void {
    if (this.window.length < START_SAMPLES) this.window.push(ms);
    else this.window[this.next] = ms;
    this.next = (this.next + 1) % START_SAMPLES;
    this.estimate = Math.round(median(this.window));
  }

  /**
   * Publishes what every thread reads: `cold` (no replica ready), `askedAt` (performance.now()
   * when the start in progress was asked for, or -1: none) and `nothingLive` (no replica starting,
   * ready or unreachable). Nothing before the first measured start.
   */
  publish(cold: boolean, askedAt: number, nothingLive: boolean): void {
    if (this.estimate < 0) return;
    const readyAt = !cold ? 0 : askedAt >= 0 ? performance.timeOrigin + askedAt + this.estimate : nothingLive ? -1 : 0;
    this.shared.publish(this.estimate, readyAt);
  }
}

/** performance.now() when the earliest replica still `starting` was created, or -1. */
export function earliestStarting(replicas: Iterable<ManagedReplica>): number {
  let at = -1;
  for (const r of replicas) if (r.state === 'starting' && (at < 0 || r.createdAt < at)) at = r.createdAt;
  return at;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
