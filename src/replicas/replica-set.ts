// A service's replicas: which one gets the next request, the queue of requests waiting for one,
// and (launched kind) when to start and stop replica processes. Contract section 6.
//
// Hot path: `acquire` with a ready replica that has room is a loop over the ready array and a
// call to `waiter.onReplica`: no promise, closure, timer or allocation. `release` is a decrement,
// plus one clock read when the replica becomes idle.
//
// Decisions (documented here because the contract is silent on them):
//
// - Choice: least outstanding requests (`inflight`) among ready replicas under `concurrency`
//   (0 = unlimited); ties go to the earlier replica, so spare replicas go idle and get stopped.
// - FIFO: while anyone is queued, a new request queues behind them.
// - Scaling (launched): a replica is started while the queue holds more waiters than the replicas
//   already starting will take (`starting × concurrency`; with unlimited concurrency one starting
//   replica takes them all) and fewer than `max` replicas hold a slot. A slot is held from the
//   moment a replica is created (so a burst of 200 on a cold service with max 1 starts exactly
//   one) until its process has exited (a draining or killed process still holds memory, GPU
//   included, so it still counts toward `max`).
// - A failed start: every queued waiter gets `503 no_replica` (Retry-After = the backoff) at once,
//   unless another replica is ready or still starting and can take them. The set then waits a
//   backoff before the next start: 250 ms, doubling per consecutive failure up to 5 s; the count
//   resets once a replica has stayed ready for 10 s, so a crash loop after readiness backs off too.
//   A request arriving during the backoff is queued; the next start happens when the backoff ends
//   and serves it, or fails it with `no_replica` if that start fails as well.
// - A process that exits while ready: the replica is `failed`, its pool closed (requests in
//   flight on it fail with their socket), and a replacement starts (after the backoff) if
//   requests are queued or `min` requires it.
// - `unreachable` (connection refused before any byte was sent) takes the replica out of rotation
//   at once, for both kinds, and probes it every 500 ms until it answers. Launched replicas are
//   not killed for it: a refused connection can be a keep-alive race, and a model that took a
//   minute to load should not be restarted for one refused connection. If its process dies, the
//   exit event takes over.
// - Static sets never queue for a cold start: their replicas start `ready` (optimistically, so a
//   set that has not been probed yet serves at once). When every static replica is out of
//   rotation, `acquire` hands out the one taken out longest ago anyway (the "panic" rule of Envoy
//   and most load balancers): if the probe was wrong or the replica just came back, the request
//   succeeds instead of failing for up to a probe interval; if it is really down, the relay gets
//   a refused connection, releases it as `unreachable`, retries with `exclude`, finds no other
//   ready replica and answers `502 upstream_unavailable` within milliseconds. (A launched set
//   queues that retry instead: the refusing replica is usually one whose process is exiting.) Static sets queue
//   only when every in-rotation replica is at its `concurrency`.
import type { Agent } from 'node:http';
import type { UpstreamPool } from '../upstream/pool.js';
import type { ServiceConfig } from '../config-types.js';
import { RelayError } from '../errors.js';
import type { Logger } from '../log.js';
import { createPool } from '../upstream/pools.js';
import { findFreePort, spawnReplica, type ProcessExit } from './launchers/process.js';
import { staticTarget } from './launchers/static.js';
import { createProbeAgent, probeHttp, probeTcp, type ProbeResult } from './probe.js';
import { WaiterQueue, type QueuedWaiter } from './queue.js';
import { ManagedReplica, canTransition, type ReplicaStateName } from './replica.js';
import type { ReleaseOutcome, Replica, ReplicaSet, ReplicaWaiter } from './types.js';

export type { ReplicaStateName } from './replica.js';

/** How a queued waiter left the queue. */
export type QueueOutcome = 'granted' | 'expired' | 'failed' | 'cancelled' | 'draining';

/**
 * An observer for metrics. Every method is called synchronously, after the change, and must not
 * throw or call back into the set. When `deps.events` is absent nothing is computed for it.
 */
export interface ReplicaEvents {
  /** The number of queued waiters changed (push, grant, expiry, cancel, failure, drain). */
  queueDepth(service: string, depth: number): void;
  /** A waiter left the queue after `ms`; `granted` is the queue wait of a served request. */
  queueWait(service: string, ms: number, outcome: QueueOutcome): void;
  /** A replica moved from `from` (null: just created) to `to` after `ms` in `from`. */
  replicaState(service: string, replica: string, from: ReplicaStateName | null, to: ReplicaStateName, ms: number): void;
  /** A launched replica became ready `ms` after it was created (port, spawn, load, probe). */
  coldStart(service: string, replica: string, ms: number): void;
}

/** Timings that tests shorten; production uses the defaults. */
export interface ReplicaSetTuning {
  /** Readiness poll of a starting replica: this interval (at least) for its first 2 s, then at
   *  least 25 ms until 30 s, then at least 100 ms. */
  readinessPollMs: number;
  /** Periodic probe of a ready static replica when `readyPath` is set. */
  probeIntervalMs: number;
  /** Probe of an out-of-rotation (`unreachable`) replica. */
  recoveryProbeMs: number;
  /** One probe's connect and answer limit. */
  probeTimeoutMs: number;
  /** First backoff after a failed start; doubles per consecutive failure. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** A replica ready this long resets the consecutive failure count. */
  stableMs: number;
  /** SIGTERM → SIGKILL grace when stopping a replica process. */
  stopGraceMs: number;
  /** How long closing a replica's pool may wait for its requests before destroying it. */
  poolCloseMs: number;
}

export const DEFAULT_TUNING: Readonly<ReplicaSetTuning> = Object.freeze({
  readinessPollMs: 10,
  probeIntervalMs: 2_000,
  recoveryProbeMs: 500,
  probeTimeoutMs: 2_000,
  backoffBaseMs: 250,
  backoffMaxMs: 5_000,
  stableMs: 10_000,
  stopGraceMs: 5_000,
  poolCloseMs: 1_000,
});

export interface ReplicaSetDeps {
  logger: Logger;
  events?: ReplicaEvents;
  tuning?: Partial<ReplicaSetTuning>;
}

export interface ReplicaSnapshot {
  id: string;
  state: ReplicaStateName;
  inflight: number;
  origin: string;
  /** The process id of a launched replica (undefined for static ones or before spawn). */
  pid: number | undefined;
}

export interface ReplicaSetSnapshot {
  slug: string;
  kind: 'static' | 'launched';
  accepting: boolean;
  queued: number;
  /** Every replica that holds a slot (not yet stopped, or its process not yet exited). */
  replicas: ReplicaSnapshot[];
}

/** The set as its owner (server, metrics, tests) sees it: the seam plus a read-only view. */
export interface ManagedReplicaSet extends ReplicaSet {
  snapshot(): ReplicaSetSnapshot;
}

/** Retry-After (seconds) for `queue_full`: the queue moves as soon as replicas free up. */
const QUEUE_FULL_RETRY_AFTER_S = 1;
/** Retry-After (seconds) for `no_replica` after `queue.maxWaitMs`. */
const WAIT_EXPIRED_RETRY_AFTER_S = 5;

const clock = (): number => performance.now();

/** Starts the set: static replicas are in rotation, `min` launched replicas are starting. */
export function createReplicaSet(service: ServiceConfig, deps: ReplicaSetDeps): ManagedReplicaSet {
  return new ReplicaSetImpl(service, deps);
}

class ReplicaSetImpl implements ManagedReplicaSet {
  readonly slug: string;
  private readonly service: ServiceConfig;
  private readonly launched: boolean;
  private readonly concurrency: number;
  private readonly log: Logger;
  private readonly events: ReplicaEvents | undefined;
  private readonly tuning: ReplicaSetTuning;
  private readonly queue: WaiterQueue;
  private readonly probeAgent: Agent;

  /** Every replica holding a slot: not terminal, or terminal with its process still exiting. */
  private readonly all = new Set<ManagedReplica>();
  /** The replicas in state `ready`: all the hot path reads. */
  private readonly ready: ManagedReplica[] = [];
  /** Replicas in state `starting`. */
  private starting = 0;
  /** Replicas in `starting`, `ready` or `unreachable` (counted against `min`). */
  private live = 0;
  private lastId = 0;

  /** False after `drain()`: every acquire fails with `draining`. */
  private accepting = true;
  private closing: Promise<void> | undefined = undefined;
  /** A dispatch loop is running: a nested release or acquire leaves the queue to it. */
  private dispatching = false;

  /** Consecutive failed replicas, and the backoff they impose on the next start. */
  private failures = 0;
  private lastFailureAt = -Infinity;
  private lastReadyAt = -Infinity;
  private backoffUntil = 0;
  private backoffTimer: NodeJS.Timeout | undefined = undefined;

  /** Launches and pool closes in progress; `close()` awaits them. */
  private readonly pending = new Set<Promise<void>>();

  // Errors that carry nothing request-specific are built once per set: a full queue under
  // overload then costs no stack capture per refused request.
  private readonly queueFullError: RelayError;
  private readonly drainingError: RelayError;
  private readonly waitExpiredError: RelayError;
  private readonly noOtherReplicaError: RelayError;

  constructor(service: ServiceConfig, deps: ReplicaSetDeps) {
    this.slug = service.slug;
    this.service = service;
    this.launched = service.replicas.command !== undefined && service.replicas.command.length > 0;
    this.concurrency = service.replicas.concurrency;
    this.log = deps.logger;
    this.events = deps.events;
    this.tuning = { ...DEFAULT_TUNING, ...deps.tuning };
    this.probeAgent = createProbeAgent(this.tuning.probeTimeoutMs);
    this.queue = new WaiterQueue(service.queue.maxRequests, service.queue.maxWaitMs, (waiter, waitedMs) =>
      this.expired(waiter, waitedMs),
    );
    this.queueFullError = new RelayError('queue_full', {
      message: `The service queue is full (${service.queue.maxRequests} requests); retry later.`,
      headers: { 'retry-after': String(QUEUE_FULL_RETRY_AFTER_S) },
    });
    this.drainingError = new RelayError('draining', { headers: { 'retry-after': '5' } });
    this.waitExpiredError = new RelayError('no_replica', {
      message: `No replica of the service could take the request within ${service.queue.maxWaitMs} ms.`,
      headers: { 'retry-after': String(WAIT_EXPIRED_RETRY_AFTER_S) },
    });
    this.noOtherReplicaError = new RelayError('upstream_unavailable', {
      message: 'The service replica could not be reached and no other replica is ready.',
      retryable: false,
    });

    if (this.launched) {
      this.scale();
    } else {
      for (const url of service.replicas.urls ?? []) {
        const target = staticTarget(url);
        const r = this.create(target.origin, target.host, createPool(target.origin, service));
        r.probeHost = target.probeHost;
        r.probePort = target.probePort;
        this.transition(r, 'ready', 'static replica');
      }
    }
  }

  // ---- the seam (types.ts) ----------------------------------------------------------------

  acquire(waiter: ReplicaWaiter, exclude?: Replica): void {
    if (!this.accepting) {
      waiter.onNoReplica(this.drainingError);
      return;
    }
    const replica = this.pick(exclude);
    if (exclude !== undefined) {
      // The retry after `unreachable`: another replica that is ready now. Failing that, a launched
      // set queues the request (its replica is probably dying and will be replaced, or it comes
      // back); a static set answers 502 at once.
      if (replica === undefined) {
        if (this.launched) this.enqueue(waiter, false);
        else waiter.onNoReplica(this.noOtherReplicaError);
        return;
      }
      replica.inflight++;
      waiter.onReplica(replica);
      return;
    }
    if (replica !== undefined && this.queue.size === 0) {
      replica.inflight++;
      waiter.onReplica(replica);
      return;
    }
    this.enqueue(waiter, replica !== undefined);
  }

  cancel(waiter: ReplicaWaiter): boolean {
    const entry = this.queue.remove(waiter);
    if (entry === undefined) return false;
    if (this.events !== undefined) this.left(entry, clock(), 'cancelled', this.queue.size);
    return true;
  }

  release(replica: Replica, outcome: ReleaseOutcome): void {
    const r = replica as ManagedReplica;
    if (r.inflight <= 0) {
      this.log.error({ service: this.slug, replica: r.id, outcome }, 'replica released more often than acquired');
      return;
    }
    r.inflight--;
    if (outcome === 'unreachable') this.markUnreachable(r);
    const state = r.state;
    if (state !== 'ready' && state !== 'unreachable') return;
    if (this.queue.size > 0) this.dispatch();
    if (r.inflight === 0 && this.launched && r.state === 'ready') {
      r.idleSince = clock();
      if (r.idleTimer === undefined) this.armIdle(r, this.service.replicas.idleTimeoutMs);
    }
  }

  drain(): void {
    if (!this.accepting) return;
    this.accepting = false;
    if (this.backoffTimer !== undefined) {
      clearTimeout(this.backoffTimer);
      this.backoffTimer = undefined;
    }
    this.log.info({ service: this.slug, queued: this.queue.size }, 'replica set draining');
    this.failQueued(this.drainingError, 'draining');
  }

  close(): Promise<void> {
    if (this.closing === undefined) {
      this.drain();
      this.closing = this.shutdown();
    }
    return this.closing;
  }

  snapshot(): ReplicaSetSnapshot {
    const replicas: ReplicaSnapshot[] = [];
    for (const r of this.all) {
      replicas.push({ id: r.id, state: r.state, inflight: r.inflight, origin: r.origin, pid: r.process?.pid });
    }
    return {
      slug: this.slug,
      kind: this.launched ? 'launched' : 'static',
      accepting: this.accepting,
      queued: this.queue.size,
      replicas,
    };
  }

  // ---- choosing and queueing ---------------------------------------------------------------

  /** The ready replica with the fewest requests in flight and room for one more. */
  private pick(exclude: Replica | undefined): ManagedReplica | undefined {
    const ready = this.ready;
    const limit = this.concurrency;
    let best: ManagedReplica | undefined;
    let least = Infinity;
    for (let i = 0; i < ready.length; i++) {
      const r = ready[i]!;
      const n = r.inflight;
      if (n < least && (limit === 0 || n < limit) && r !== exclude) {
        best = r;
        least = n;
      }
    }
    if (best === undefined && ready.length === 0 && !this.launched && exclude === undefined) {
      return this.staticFallback();
    }
    return best;
  }

  /** Static set with nothing in rotation: the replica taken out longest ago, if it has room. */
  private staticFallback(): ManagedReplica | undefined {
    let best: ManagedReplica | undefined;
    for (const r of this.all) {
      if (r.state !== 'unreachable') continue;
      if (this.concurrency !== 0 && r.inflight >= this.concurrency) continue;
      if (best === undefined || r.failedAt < best.failedAt) best = r;
    }
    return best;
  }

  private enqueue(waiter: ReplicaWaiter, roomNow: boolean): void {
    if (!this.queue.push(waiter)) {
      waiter.onNoReplica(this.queueFullError);
      return;
    }
    if (this.events !== undefined) this.events.queueDepth(this.slug, this.queue.size);
    if (roomNow) this.dispatch();
    else if (this.launched) this.scale();
  }

  /** Hands queued waiters, in arrival order, to ready replicas with room. Synchronous. */
  private dispatch(): void {
    if (this.dispatching) return;
    this.dispatching = true;
    const now = this.events !== undefined ? clock() : 0;
    let granted = 0;
    try {
      while (this.queue.size > 0) {
        const r = this.pick(undefined);
        if (r === undefined) break;
        const entry = this.queue.shift()!;
        r.inflight++;
        granted++;
        if (this.events !== undefined) this.events.queueWait(this.slug, now - entry.enqueuedAt, 'granted');
        try {
          entry.waiter.onReplica(r);
        } catch (err) {
          this.log.error({ service: this.slug, replica: r.id, err }, 'waiter threw from onReplica');
        }
      }
    } finally {
      this.dispatching = false;
    }
    if (granted > 0 && this.events !== undefined) this.events.queueDepth(this.slug, this.queue.size);
  }

  /** `queue.maxWaitMs` ran out for a waiter (it has left the queue). */
  private expired(waiter: ReplicaWaiter, waitedMs: number): void {
    if (this.events !== undefined) {
      this.events.queueWait(this.slug, waitedMs, 'expired');
      this.events.queueDepth(this.slug, this.queue.size);
    }
    this.log.debug({ service: this.slug, waitedMs: Math.round(waitedMs) }, 'queued request expired');
    try {
      waiter.onNoReplica(this.waitExpiredError);
    } catch (err) {
      this.log.error({ service: this.slug, err }, 'waiter threw from onNoReplica');
    }
  }

  /** Fails every queued waiter with `error`. */
  private failQueued(error: RelayError, outcome: QueueOutcome): void {
    if (this.queue.size === 0) return;
    const now = clock();
    this.queue.clear((entry) => {
      if (this.events !== undefined) this.left(entry, now, outcome, -1);
      try {
        entry.waiter.onNoReplica(error);
      } catch (err) {
        this.log.error({ service: this.slug, err }, 'waiter threw from onNoReplica');
      }
    });
    if (this.events !== undefined) this.events.queueDepth(this.slug, this.queue.size);
  }

  private left(entry: QueuedWaiter, now: number, outcome: QueueOutcome, depth: number): void {
    const events = this.events!;
    events.queueWait(this.slug, now - entry.enqueuedAt, outcome);
    if (depth >= 0) events.queueDepth(this.slug, depth);
  }

  // ---- the state machine ---------------------------------------------------------------------

  /** A new replica in `starting`; it holds a slot until it is terminal and its process is gone. */
  private create(origin: string, host: string, pool: UpstreamPool | undefined): ManagedReplica {
    const now = clock();
    const r = new ManagedReplica(`${this.slug}-${++this.lastId}`, now, origin, host, pool);
    this.all.add(r);
    this.starting++;
    this.live++;
    this.log.info({ service: this.slug, replica: r.id, from: null, to: 'starting', ms: 0, reason: 'created' }, 'replica state');
    if (this.events !== undefined) this.events.replicaState(this.slug, r.id, null, 'starting', 0);
    return r;
  }

  /**
   * THE transition function: checks the move against TRANSITIONS, ends the old state's timers,
   * keeps the counters and the ready array, logs `{ service, replica, from, to, ms }` (ms spent
   * in `from`), tells the observer, then runs what entering `to` means.
   */
  private transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean {
    const from = r.state;
    if (!canTransition(from, to)) {
      this.log.error({ service: this.slug, replica: r.id, from, to, reason }, 'replica transition refused');
      return false;
    }
    const now = clock();
    const ms = Math.round(now - r.since);
    r.state = to;
    r.since = now;
    r.clearTimers();
    if (from === 'starting') this.starting--;
    if (isLive(from)) this.live--;
    if (isLive(to)) this.live++;
    if (from === 'ready') {
      const i = this.ready.indexOf(r);
      if (i !== -1) this.ready.splice(i, 1);
    } else if (to === 'ready') {
      this.ready.push(r);
    }
    const line = { service: this.slug, replica: r.id, from, to, ms, reason, pid: r.process?.pid, ...detail };
    if (to === 'failed') this.log.warn(line, 'replica state');
    else this.log.info(line, 'replica state');
    if (this.events !== undefined) this.events.replicaState(this.slug, r.id, from, to, ms);

    switch (to) {
      case 'ready':
        this.enterReady(r, from, now);
        break;
      case 'unreachable':
        this.scheduleRecheck(r);
        break;
      case 'draining':
        this.enterDraining(r);
        break;
      case 'failed':
        this.enterFailed(r, from, now);
        break;
      case 'stopped':
        this.forget(r);
        break;
      case 'starting':
        break;
    }
    return true;
  }

  private enterReady(r: ManagedReplica, from: ReplicaStateName, now: number): void {
    r.lastProbe = '';
    r.idleSince = now;
    if (from === 'starting') {
      this.lastReadyAt = now;
      if (this.launched && this.events !== undefined) this.events.coldStart(this.slug, r.id, now - r.createdAt);
    }
    if (this.launched) this.armIdle(r, this.service.replicas.idleTimeoutMs);
    else if (this.service.replicas.readyPath !== undefined) this.scheduleRecheck(r);
    if (this.queue.size > 0) this.dispatch();
  }

  private enterDraining(r: ManagedReplica): void {
    if (r.processGone) {
      this.transition(r, 'stopped', 'no process to stop');
      return;
    }
    // The exit event moves it to `stopped`.
    void r.process!.stop(this.tuning.stopGraceMs);
  }

  private enterFailed(r: ManagedReplica, from: ReplicaStateName, now: number): void {
    if (this.lastReadyAt > this.lastFailureAt && now - this.lastReadyAt >= this.tuning.stableMs) this.failures = 0;
    this.failures++;
    this.lastFailureAt = now;
    const backoffMs = Math.min(this.tuning.backoffMaxMs, this.tuning.backoffBaseMs * 2 ** (this.failures - 1));
    this.backoffUntil = now + backoffMs;
    if (from === 'starting' && this.ready.length === 0 && this.starting === 0) {
      // Nothing else can serve the queue: every waiter learns it now, not at maxWaitMs.
      this.failQueued(
        new RelayError('no_replica', {
          message: 'The service replica failed to start.',
          headers: { 'retry-after': String(Math.max(1, Math.ceil(backoffMs / 1000))) },
        }),
        'failed',
      );
    }
    if (r.processGone) this.forget(r);
    else void r.process!.stop(this.tuning.stopGraceMs); // start timeout: the exit event forgets it
  }

  /** Lets go of a terminal replica whose process is gone: frees its slot and closes its pool. */
  private forget(r: ManagedReplica): void {
    if (!this.all.delete(r)) return;
    const pool = r.pool as UpstreamPool | undefined;
    if (pool !== undefined) {
      const closing = closePool(pool, this.tuning.poolCloseMs);
      this.pending.add(closing);
      void closing.finally(() => this.pending.delete(closing));
    }
    this.scale();
  }

  /** The child process exited (or could not be spawned). */
  private onExit(r: ManagedReplica, exit: ProcessExit): void {
    const detail: Record<string, unknown> = { code: exit.code, signal: exit.signal };
    if (exit.error !== undefined) detail['error'] = exit.error.message;
    switch (r.state) {
      case 'starting':
        detail['output'] = r.process?.recentOutput();
        this.transition(r, 'failed', 'exited while starting', detail);
        break;
      case 'ready':
      case 'unreachable':
        detail['output'] = r.process?.recentOutput();
        this.transition(r, 'failed', 'exited', detail);
        break;
      case 'draining':
        this.transition(r, 'stopped', 'exited', detail);
        break;
      case 'failed':
      case 'stopped':
        // Killed after a start timeout: its slot is free now.
        this.log.info({ service: this.slug, replica: r.id, ...detail }, 'replica process exited');
        this.forget(r);
        break;
    }
  }

  // ---- launched replicas -----------------------------------------------------------------------

  /** Starts replicas while the queue or `min` needs them, within `max` and the backoff. */
  private scale(): void {
    if (!this.launched || !this.accepting) return;
    const { min, max } = this.service.replicas;
    while (this.all.size < max) {
      const startingTakes = this.starting === 0 ? 0 : this.concurrency === 0 ? Infinity : this.starting * this.concurrency;
      const forQueue = this.queue.size > startingTakes;
      const forMin = this.live < min;
      if (!forQueue && !forMin) return;
      const now = clock();
      if (now < this.backoffUntil) {
        if (this.backoffTimer === undefined) {
          this.backoffTimer = setTimeout(() => {
            this.backoffTimer = undefined;
            this.scale();
          }, Math.ceil(this.backoffUntil - now));
          this.backoffTimer.unref();
        }
        return;
      }
      const r = this.create('', '', undefined);
      // Tracked so that `close()` also waits for a launch caught between port and spawn.
      const launching = this.launch(r, forQueue ? 'queued requests' : 'min');
      this.pending.add(launching);
      void launching.finally(() => this.pending.delete(launching));
    }
  }

  /** Chooses the port, spawns the process and starts the readiness poll. */
  private async launch(r: ManagedReplica, why: string): Promise<void> {
    let port: number;
    try {
      port = await findFreePort();
    } catch (err) {
      this.log.error({ service: this.slug, replica: r.id, err }, 'no free port for a replica');
      if (r.state === 'starting') this.transition(r, 'failed', 'no free port');
      return;
    }
    if (r.state !== 'starting') return; // closed meanwhile
    r.origin = `http://127.0.0.1:${port}`;
    r.host = `127.0.0.1:${port}`;
    r.probeHost = '127.0.0.1';
    r.probePort = port;
    r.pool = createPool(r.origin, this.service);
    try {
      r.process = spawnReplica({
        command: this.service.replicas.command!,
        env: this.service.replicas.env,
        port,
        logger: this.log,
        service: this.slug,
        replica: r.id,
        onExit: (exit) => this.onExit(r, exit),
      });
    } catch (err) {
      this.log.error({ service: this.slug, replica: r.id, err }, 'replica spawn failed');
      this.transition(r, 'failed', 'spawn failed');
      return;
    }
    this.log.info(
      { service: this.slug, replica: r.id, pid: r.process.pid, port, why, command: this.service.replicas.command },
      'replica process spawned',
    );
    r.startTimer = setTimeout(() => {
      r.startTimer = undefined;
      if (r.state === 'starting') {
        this.transition(r, 'failed', 'start timeout', {
          startTimeoutMs: this.service.replicas.startTimeoutMs,
          lastProbe: r.lastProbe,
          output: r.process?.recentOutput(),
        });
      }
    }, this.service.replicas.startTimeoutMs);
    r.startTimer.unref();
    this.schedulePoll(r, 0);
  }

  private schedulePoll(r: ManagedReplica, delay: number): void {
    r.probeTimer = setTimeout(() => void this.poll(r), delay);
    r.probeTimer.unref();
  }

  /** One readiness probe of a starting replica. */
  private async poll(r: ManagedReplica): Promise<void> {
    r.probeTimer = undefined;
    if (r.state !== 'starting' || r.probing) return;
    r.probing = true;
    const result = await this.probe(r);
    r.probing = false;
    if (r.state !== 'starting') return;
    this.noteProbe(r, result);
    if (result.ok) {
      this.transition(r, 'ready', 'readiness probe answered');
      return;
    }
    const elapsed = clock() - r.createdAt;
    const floor = elapsed < 2_000 ? 0 : elapsed < 30_000 ? 25 : 100;
    this.schedulePoll(r, Math.max(this.tuning.readinessPollMs, floor));
  }

  private armIdle(r: ManagedReplica, delay: number): void {
    r.idleTimer = setTimeout(() => this.idleCheck(r), delay);
    r.idleTimer.unref();
  }

  /** A ready replica's idle timer fired: stop it if it has been idle long enough and may go. */
  private idleCheck(r: ManagedReplica): void {
    r.idleTimer = undefined;
    if (r.state !== 'ready' || r.inflight > 0) return; // the next release to 0 re-arms it
    const limit = this.service.replicas.idleTimeoutMs;
    const idleFor = clock() - r.idleSince;
    if (idleFor < limit - 1) {
      this.armIdle(r, Math.ceil(limit - idleFor));
      return;
    }
    if (this.live <= this.service.replicas.min || this.queue.size > 0) {
      this.armIdle(r, limit); // kept for `min`; looked at again later
      return;
    }
    this.transition(r, 'draining', 'idle', { idleMs: Math.round(idleFor) });
  }

  // ---- probes (static replicas, and any replica out of rotation) --------------------------------

  private probe(r: ManagedReplica): Promise<ProbeResult> {
    const path = this.service.replicas.readyPath;
    return path !== undefined
      ? probeHttp(this.probeAgent, r.origin, path, this.tuning.probeTimeoutMs)
      : probeTcp(r.probeHost, r.probePort, this.tuning.probeTimeoutMs);
  }

  private noteProbe(r: ManagedReplica, result: ProbeResult): void {
    if (result.detail === r.lastProbe) return;
    r.lastProbe = result.detail;
    this.log.debug({ service: this.slug, replica: r.id, state: r.state, probe: result.detail }, 'replica probe');
  }

  /** `release(r, 'unreachable')`: out of rotation at once. */
  private markUnreachable(r: ManagedReplica): void {
    if (r.state !== 'ready' && r.state !== 'unreachable') return;
    r.failedAt = clock();
    if (r.state === 'ready') this.transition(r, 'unreachable', 'connection refused');
  }

  /** Next probe of a ready static replica (with readyPath) or of an unreachable replica. */
  private scheduleRecheck(r: ManagedReplica): void {
    if (r.probeTimer !== undefined || this.closing !== undefined) return;
    let delay: number;
    if (r.state === 'unreachable') delay = this.tuning.recoveryProbeMs;
    else if (r.state === 'ready' && !this.launched && this.service.replicas.readyPath !== undefined) delay = this.tuning.probeIntervalMs;
    else return;
    r.probeTimer = setTimeout(() => void this.recheck(r), delay);
    r.probeTimer.unref();
  }

  private async recheck(r: ManagedReplica): Promise<void> {
    r.probeTimer = undefined;
    const state = r.state;
    if (state !== 'ready' && state !== 'unreachable') return;
    if (r.probing) {
      // A probe started in the previous state is still out: look again after the interval.
      this.scheduleRecheck(r);
      return;
    }
    r.probing = true;
    const result = await this.probe(r);
    r.probing = false;
    if (r.state !== state) {
      // Moved meanwhile (its result is stale): make sure the new state's probe is scheduled.
      this.scheduleRecheck(r);
      return;
    }
    this.noteProbe(r, result);
    if (state === 'unreachable' && result.ok) {
      this.transition(r, 'ready', 'probe succeeded');
    } else if (state === 'ready' && !result.ok) {
      r.failedAt = clock();
      this.transition(r, 'unreachable', 'probe failed', { probe: result.detail });
    } else {
      this.scheduleRecheck(r);
    }
  }

  // ---- shutdown ----------------------------------------------------------------------------------

  private async shutdown(): Promise<void> {
    const exits: Promise<unknown>[] = [];
    for (const r of [...this.all]) {
      if (r.state === 'starting' || r.state === 'ready' || r.state === 'unreachable') this.transition(r, 'draining', 'close');
      r.clearTimers();
      if (!r.processGone) exits.push(r.process!.stop(this.tuning.stopGraceMs));
    }
    await Promise.all(exits);
    // Every exit has run `onExit` (and so `forget`) before its promise resolved.
    await Promise.all([...this.pending]);
    this.probeAgent.destroy();
    this.log.info({ service: this.slug }, 'replica set closed');
  }
}

function isLive(state: ReplicaStateName): boolean {
  return state === 'starting' || state === 'ready' || state === 'unreachable';
}

/** `close()` (let requests finish) bounded by `ms`, then `destroy()`. Never rejects. */
async function closePool(pool: UpstreamPool, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const closed = pool.close().then(
    () => true,
    () => true,
  );
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  const done = await Promise.race([closed, late]);
  clearTimeout(timer);
  if (!done) pool.destroy();
}
