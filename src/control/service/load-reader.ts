// The model servers' own load (`replicas.load`), read on the control plane, off the request path:
// every `intervalMs`, a GET of each ready replica's Prometheus endpoint (at most one per replica at
// a time, load-fetch.ts: at most 1 MiB), the configured metrics read out of its body as it arrives
// (metric-scanner.ts: one pass for every name, lines over 4 KiB skipped), and the result published
// to every thread through the shared slot table (slot-control.ts `publishReading`): no message per
// reading or per request.
//
// - The score a thread weighs is the replica's waiting requests (summed over the metric's
//   series, e.g. one per engine) plus what this gateway sent it since the reading began and still
//   has in flight; a replica whose cache usage (the highest over its series) is at or above
//   `cacheUsageHigh` is chosen only when every other ready replica is as full. The requests the
//   server is running (a preset's `running` gauge, summed) are read too and shown on /status.
// - Fallback: a reading older than three intervals, an endpoint that fails (refused, timed out,
//   not 2xx, too large) or that lacks the waiting metric clears the replica's reading: threads
//   weigh it by its requests in flight until a reading succeeds again. The control plane decides
//   staleness here, so threads read no clock per request. Each replica's failure is logged once
//   (`load reading failed`), and its recovery once (`load reading recovered`), never per scrape.
// - A reading's deadline is twice the interval (at most 10 s): a reading that arrives later would
//   be nearly stale, and a hanging endpoint must not hold the replica's one fetch for long. A
//   request never waits for a reading.
// - Connections: one kept-alive raw socket per replica (load-fetch.ts, read by the upstream
//   response parser), closed when the replica leaves rotation or the service closes.
import type { LoadConfig, ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import type { SlotControl } from '../../replicas/slot-control.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import { ExpositionRead, type ReadingSink } from './load-fetch.js';
import type { ReplicaLoad as LoadSnapshot } from '../../admin/status-source.js';
import { type MetricSamples, MetricScanner } from './metric-scanner.js';
import type { ManagedReplica } from './replica.js';

/** A reading older than this many intervals is stale. */
const LOAD_STALE_INTERVALS = 3;

/** The longest a reading may take (or twice the interval, if shorter). */
const LOAD_READ_MAX_TIMEOUT_MS = 10_000;

/** One replica's reading state. */
class ReplicaLoad {
  /** Reads this replica's body as it arrives (one reading at a time, so one scanner). */
  readonly scanner: MetricScanner;
  /** The readings of its endpoint, one at a time, on one kept-alive connection. */
  readonly fetch: ExpositionRead;
  /** The replica's requests taken when the reading under way began (slot-control.ts `publishReading`). */
  takenAtStart = 0;
  valid = false;
  /** performance.now() when the last valid reading began (0: none). */
  readAt = 0;
  waiting: number | null = null;
  cacheUsage: number | null = null;
  running: number | null = null;
  /** The latest failure (the first of a run is logged), or undefined while readings succeed. */
  problem: string | undefined = undefined;
  /** performance.now() when the failure began. */
  failingSince = 0;
  /** A configured cache metric the server does not export (logged once). */
  cacheMissingLogged = false;

  constructor(names: readonly string[], sink: ReadingSink, r: ManagedReplica, path: string, timeoutMs: number) {
    this.scanner = new MetricScanner(names);
    this.fetch = new ExpositionRead(sink, r, r.origin, path, this.scanner, timeoutMs);
  }
}

export class LoadReader implements ReadingSink {
  readonly timeoutMs: number;
  private readonly states = new Map<ManagedReplica, ReplicaLoad>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;
  /** Every metric name read, once: the scanner's indexes. */
  private readonly names: string[];
  /** The indexes of `load.waiting`, `load.cacheUsage` and `load.running` in `names`. */
  private readonly waitingAt: number[];
  private readonly cacheAt: number[];
  private readonly runningAt: number[];

  constructor(
    private readonly service: ServiceConfig,
    private readonly load: LoadConfig,
    private readonly slots: SlotControl,
    /** The service's replicas: the ready ones are read. */
    private readonly replicas: () => Iterable<ManagedReplica>,
    private readonly log: Logger,
    private readonly events: ReplicaEvents | undefined,
  ) {
    this.timeoutMs = Math.min(2 * load.intervalMs, LOAD_READ_MAX_TIMEOUT_MS);
    this.names = [...new Set([...load.waiting, ...load.cacheUsage, ...load.running])];
    this.waitingAt = load.waiting.map((n) => this.names.indexOf(n));
    this.cacheAt = load.cacheUsage.map((n) => this.names.indexOf(n));
    this.runningAt = load.running.map((n) => this.names.indexOf(n));
    this.timer = setInterval(() => this.tick(), load.intervalMs);
    this.timer.unref();
  }

  /** Reads every ready replica that has no reading under way; clears stale readings. */
  tick(): void {
    if (this.closed) return;
    const now = performance.now();
    for (const r of this.replicas()) {
      if (r.state !== 'ready' || r.origin === '') continue;
      let state = this.states.get(r);
      if (state !== undefined && state.fetch.origin !== r.origin) {
        // Back at another address without leaving rotation in between: read it there afresh.
        this.left(r);
        state = undefined;
      }
      if (state === undefined) {
        state = new ReplicaLoad(this.names, this, r, this.load.path, this.timeoutMs);
        this.states.set(r, state);
      }
      if (state.valid && now - state.readAt > LOAD_STALE_INTERVALS * this.load.intervalMs) {
        this.failed(r, state, `stale (no reading for ${Math.round(now - state.readAt)} ms)`);
      }
      // The whole reading's deadline, checked here, at the interval (no timer per reading): a
      // reading still under way past it is cut, and the next one starts.
      state.fetch.overdue(now);
      if (!state.fetch.reading) {
        state.takenAtStart = this.slots.taken(r.slot);
        state.fetch.start(now);
      }
    }
  }

  /** The replica left rotation (or is gone): its reading goes with it; a return starts afresh. */
  left(r: ManagedReplica): void {
    const state = this.states.get(r);
    if (state === undefined) return;
    this.states.delete(r);
    state.fetch.close();
    this.slots.clearReading(r.slot);
    if (state.valid) this.events?.replicaLoad(this.service.slug, r.id, null);
  }

  snapshot(r: ManagedReplica): LoadSnapshot | undefined {
    const state = this.states.get(r);
    if (state === undefined) return undefined;
    return {
      waiting: state.waiting,
      cacheUsage: state.cacheUsage,
      running: state.running,
      ageMs: state.readAt === 0 ? null : Math.round(performance.now() - state.readAt),
      used: state.valid,
      problem: state.valid ? null : (state.problem ?? null),
    };
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const state of this.states.values()) state.fetch.close();
  }

  /** A reading ended (load-fetch.ts): its result is published, unless it describes nothing current. */
  readingDone(read: ExpositionRead, problem: string | undefined): void {
    const r = read.replica;
    const state = this.states.get(r);
    // Gone, out of rotation or closed meanwhile: the result describes nothing current.
    if (this.closed || state === undefined || state.fetch !== read || r.state !== 'ready') return;
    if (problem !== undefined) {
      this.failed(r, state, problem);
      return;
    }
    const scanner = state.scanner;
    const waiting = firstMetric(scanner, this.waitingAt);
    if (waiting === undefined) {
      this.failed(r, state, `no ${this.load.waiting.join(' or ')} sample`);
      return;
    }
    // Every sample is finite, but their sum can overflow (two near 1.8e308): no reading, like an
    // infinite sample (docs/configuration.md#the-model-servers-own-queue).
    if (!Number.isFinite(waiting.sum)) {
      this.failed(r, state, `${this.load.waiting.join(' or ')} sums past the largest number`);
      return;
    }
    const cache = firstMetric(scanner, this.cacheAt);
    if (cache === undefined && this.load.cacheUsage.length > 0 && !state.cacheMissingLogged) {
      state.cacheMissingLogged = true;
      this.log.warn({ service: this.service.slug, replica: r.id, metric: this.load.cacheUsage.join(' or ') }, 'load reading has no cache usage; the replica is never treated as full');
    }
    const running = firstMetric(scanner, this.runningAt);
    state.running = running === undefined || !Number.isFinite(running.sum) ? null : Math.max(0, running.sum);
    this.succeeded(r, state, read.startedAt, state.takenAtStart, Math.max(0, waiting.sum), cache === undefined ? null : cache.max);
  }

  private succeeded(r: ManagedReplica, state: ReplicaLoad, startedAt: number, takenAtStart: number, waiting: number, cacheUsage: number | null): void {
    this.slots.publishReading(r.slot, waiting, cacheUsage !== null && cacheUsage >= this.load.cacheUsageHigh, takenAtStart);
    state.valid = true;
    state.readAt = startedAt;
    state.waiting = waiting;
    state.cacheUsage = cacheUsage;
    if (state.problem !== undefined) {
      this.log.info({ service: this.service.slug, replica: r.id, problem: state.problem, failedMs: Math.round(performance.now() - state.failingSince) }, 'load reading recovered');
      state.problem = undefined;
    }
    this.events?.replicaLoad(this.service.slug, r.id, { waiting, cacheUsage });
  }

  private failed(r: ManagedReplica, state: ReplicaLoad, problem: string): void {
    const wasValid = state.valid;
    state.valid = false;
    this.slots.clearReading(r.slot);
    if (wasValid) this.events?.replicaLoad(this.service.slug, r.id, null);
    const ongoing = state.problem !== undefined;
    state.problem = problem; // /status shows the latest
    if (ongoing) return; // logged when it began
    state.failingSince = performance.now();
    this.log.warn(
      { service: this.service.slug, replica: r.id, url: r.origin + this.load.path, problem },
      'load reading failed; the replica is weighed by its requests in flight until a reading succeeds',
    );
  }
}

/** The samples of the first of the names at `indexes` the exposition had. */
function firstMetric(scanner: MetricScanner, indexes: readonly number[]): MetricSamples | undefined {
  for (const i of indexes) {
    const found = scanner.samples(i);
    if (found !== undefined) return found;
  }
  return undefined;
}
