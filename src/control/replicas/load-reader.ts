// The model servers' own load (`replicas.load`), read on the control plane, off the request path:
// every `intervalMs`, a GET of each ready replica's Prometheus endpoint (at most one per replica at
// a time), the configured metrics read out of it (prometheus-text.ts), and the result published to
// every thread through the shared slot table (slots.ts `publishReading`): no message per reading
// or per request.
//
// - The score a thread weighs is the replica's waiting requests (summed over the metric's
//   series, e.g. one per engine) plus what this gateway sent it since the reading began and still
//   has in flight; a replica whose cache usage (the highest over its series) is at or above
//   `cacheUsageHigh` is chosen only when every other ready replica is as full.
// - Fallback: a reading older than three intervals, an endpoint that fails (refused, timed out,
//   not 2xx, too large) or that lacks the waiting metric clears the replica's reading: threads
//   weigh it by its requests in flight until a reading succeeds again. The control plane decides
//   staleness here, so threads read no clock per request. Each replica's failure is logged once
//   (`load reading failed`), and its recovery once (`load reading recovered`), never per scrape.
// - A reading's deadline is twice the interval (at most 10 s): a reading that arrives later would
//   be nearly stale, and a hanging endpoint must not hold the replica's one fetch for long. A
//   request never waits for a reading.
// - Connections: one keep-alive agent for the service, at most one socket per replica.
import { Agent, request } from 'node:http';
import type { LoadConfig, ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import type { SlotTable } from '../../replicas/slots.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import { readMetric } from './prometheus-text.js';
import type { ManagedReplica } from './replica.js';
import { LOAD_READ_MAX_BYTES, LOAD_READ_MAX_TIMEOUT_MS, LOAD_STALE_INTERVALS } from '../../tunables.js';

/** What /status shows of a replica's load. */
export interface LoadSnapshot {
  /** The last valid reading's waiting requests (null: none yet). */
  waiting: number | null;
  /** Its cache usage (null: not read, or not exported). */
  cacheUsage: number | null;
  /** How old that reading is, in ms (null: none yet). */
  ageMs: number | null;
  /** True while the reading is valid and weighs in the choice; false: weighed by in flight. */
  used: boolean;
  /** Why it is not used (the failure, or `stale`), if it is not. */
  problem: string | null;
}

/** One replica's reading state. */
class ReplicaLoad {
  fetching = false;
  valid = false;
  /** performance.now() when the last valid reading began (0: none). */
  readAt = 0;
  waiting: number | null = null;
  cacheUsage: number | null = null;
  /** The latest failure (the first of a run is logged), or undefined while readings succeed. */
  problem: string | undefined = undefined;
  /** performance.now() when the failure began. */
  failingSince = 0;
  /** A configured cache metric the server does not export (logged once). */
  cacheMissingLogged = false;
}

type FetchResult = { ok: true; text: string } | { ok: false; problem: string };

export class LoadReader {
  readonly timeoutMs: number;
  private readonly states = new Map<ManagedReplica, ReplicaLoad>();
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly service: ServiceConfig,
    private readonly load: LoadConfig,
    private readonly slots: SlotTable,
    /** The service's replicas: the ready ones are read. */
    private readonly replicas: () => Iterable<ManagedReplica>,
    private readonly log: Logger,
    private readonly events: ReplicaEvents | undefined,
  ) {
    this.timeoutMs = Math.min(2 * load.intervalMs, LOAD_READ_MAX_TIMEOUT_MS);
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
      if (state === undefined) {
        state = new ReplicaLoad();
        this.states.set(r, state);
      }
      if (state.valid && now - state.readAt > LOAD_STALE_INTERVALS * this.load.intervalMs) {
        this.failed(r, state, `stale (no reading for ${Math.round(now - state.readAt)} ms)`);
      }
      if (!state.fetching) this.read(r, state);
    }
  }

  /** The replica left rotation (or is gone): its reading goes with it; a return starts afresh. */
  left(r: ManagedReplica): void {
    const state = this.states.get(r);
    if (state === undefined) return;
    this.states.delete(r);
    this.slots.clearReading(r.slot);
    if (state.valid) this.events?.replicaLoad(this.service.slug, r.id, null);
  }

  snapshot(r: ManagedReplica): LoadSnapshot | undefined {
    const state = this.states.get(r);
    if (state === undefined) return undefined;
    return {
      waiting: state.waiting,
      cacheUsage: state.cacheUsage,
      ageMs: state.readAt === 0 ? null : Math.round(performance.now() - state.readAt),
      used: state.valid,
      problem: state.valid ? null : (state.problem ?? null),
    };
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    this.agent.destroy();
  }

  private read(r: ManagedReplica, state: ReplicaLoad): void {
    state.fetching = true;
    const startedAt = performance.now();
    const takenAtStart = this.slots.taken(r.slot);
    void fetchText(this.agent, r.origin + this.load.path, this.timeoutMs).then((result) => {
      state.fetching = false;
      // Gone, out of rotation or closed meanwhile: the result describes nothing current.
      if (this.closed || this.states.get(r) !== state || r.state !== 'ready') return;
      if (!result.ok) {
        this.failed(r, state, result.problem);
        return;
      }
      const waiting = firstMetric(result.text, this.load.waiting);
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
      const cache = this.load.cacheUsage.length === 0 ? undefined : firstMetric(result.text, this.load.cacheUsage);
      if (cache === undefined && this.load.cacheUsage.length > 0 && !state.cacheMissingLogged) {
        state.cacheMissingLogged = true;
        this.log.warn({ service: this.service.slug, replica: r.id, metric: this.load.cacheUsage.join(' or ') }, 'load reading has no cache usage; the replica is never treated as full');
      }
      this.succeeded(r, state, startedAt, takenAtStart, Math.max(0, waiting.sum), cache === undefined ? null : cache.max);
    });
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

/** The samples of the first of `names` the text has. */
function firstMetric(text: string, names: readonly string[]): { sum: number; max: number } | undefined {
  for (const name of names) {
    const found = readMetric(text, name);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** `GET url` → its body as latin1 text (metric names are ASCII), or why not. Never rejects. */
function fetchText(agent: Agent, url: string, timeoutMs: number): Promise<FetchResult> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: FetchResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    let req: ReturnType<typeof request>;
    try {
      req = request(url, { agent, method: 'GET', headers: { accept: 'text/plain;version=0.0.4, */*;q=0.1', 'accept-encoding': 'identity', 'user-agent': 'sluice-load' } }, (res) => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) {
          res.resume();
          done({ ok: false, problem: `status ${status}` });
          return;
        }
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > LOAD_READ_MAX_BYTES) {
            done({ ok: false, problem: `larger than ${LOAD_READ_MAX_BYTES} bytes` });
            req.destroy();
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => done({ ok: true, text: Buffer.concat(chunks).toString('latin1') }));
        res.on('error', (err) => done({ ok: false, problem: errorCode(err) }));
        res.on('aborted', () => done({ ok: false, problem: 'aborted' }));
      });
    } catch (err) {
      resolve({ ok: false, problem: errorCode(err) });
      return;
    }
    const timer = setTimeout(() => {
      done({ ok: false, problem: `no answer within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    timer.unref();
    req.on('error', (err) => done({ ok: false, problem: errorCode(err) }));
    req.on('close', () => done({ ok: false, problem: 'closed' }));
    req.end();
  });
}

function errorCode(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    if (err instanceof Error) return err.message;
  }
  return 'error';
}
