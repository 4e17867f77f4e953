// One service's replicas on the control plane (main thread): the state machine, scaling, idle
// stops, drain and close. Contract sections 6 and 10. The data planes choose replicas by reading
// the shared slot table this class writes (src/replicas/slots.ts); they reach it only for the
// queue (demand.ts) and for what they learned (a refused connection).
//
// Decisions (documented here because the contract is silent on them):
//
// - Choice (in the data plane): least outstanding requests among ready replicas under
//   `concurrency` (0 = unlimited); ties go to the earlier slot, so spare replicas go idle.
// - FIFO: while anyone is queued anywhere in the process, a new request queues behind them.
// - Scaling (launched): a replica is started while the queue holds more requests than the
//   replicas already starting will take (`starting × concurrency`; with unlimited concurrency one
//   starting replica takes them all) and fewer than `max` replicas hold a place. A place is held
//   from the moment a replica is created (so a burst of 200 on a cold service with max 1 starts
//   exactly one, whichever workers saw them) until its process has exited (a draining or killed
//   process still holds memory, GPU included, so it still counts toward `max`).
// - A failed start: every queued request gets `503 no_replica` (Retry-After = the backoff) at
//   once, unless another replica is ready or still starting. The next start waits a backoff:
//   250 ms, doubling per consecutive failure up to 5 s; the count resets once a replica has stayed
//   ready for 10 s, so a crash loop after readiness backs off too.
// - A process that exits while ready: the replica is `failed`, the data planes close their
//   connections to it, and a replacement starts (after the backoff) if requests are queued or
//   `min` requires it.
// - `unreachable` (connection refused before any byte was sent) takes the replica out of
//   rotation, for both kinds, and probes it every 500 ms until it answers. Launched replicas are
//   not killed for it: a refused connection can be a keep-alive race.
// - Static sets never queue for a cold start: their replicas start `ready`. When every static
//   replica is out of rotation, the one taken out longest ago is handed out anyway (the "panic"
//   rule of Envoy): if the probe was wrong the request succeeds; if the replica is really down the
//   retry finds nothing and the caller gets `502 upstream_unavailable` within milliseconds.
import type { ServiceConfig } from '../../config-types.js';
import { RelayError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { ProcessExit } from '../../replicas/launchers/process.js';
import { errorSpec, type ReplicaInfo } from '../../replicas/link.js';
import type { ReplicaSnapshot, ServiceControlDeps, ServiceSnapshot, ViewRouter } from './control-types.js';
import { BUSY, EMPTY, OUT, READY, SlotTable } from '../../replicas/slots.js';
import { ProcessSource } from '../sources/process.js';
import type { Endpoint, ReplicaSource } from '../sources/source.js';
import { StaticSource } from '../sources/static.js';
import { Demand } from './demand.js';
import type { ReplicaEvents } from './events.js';
import { Health } from './health.js';
import { IdleStops } from './idle.js';
import { ManagedReplica, canTransition, type ReplicaStateName } from './replica.js';
import { DEFAULT_TUNING, StartBackoff, type ReplicaSetTuning } from './tuning.js';

const SHARED_STATE: Record<ReplicaStateName, number> = { starting: BUSY, ready: READY, unreachable: OUT, draining: BUSY, stopped: BUSY, failed: BUSY };

function isLive(state: ReplicaStateName): boolean {
  return state === 'starting' || state === 'ready' || state === 'unreachable';
}

export class ServiceControl {
  readonly slug: string;
  readonly slots: SlotTable;
  readonly source: ReplicaSource;
  private readonly service: ServiceConfig;
  private readonly log: Logger;
  private readonly events: ReplicaEvents | undefined;
  private readonly tuning: ReplicaSetTuning;
  private readonly views: ViewRouter;
  private readonly demand: Demand;
  private readonly health: Health;
  /** Generation per slot of the replica the control plane has announced (-1: none). */
  private readonly known: Int32Array;

  /** Every replica holding a place: not terminal, or terminal with its process still exiting. */
  private readonly all = new Set<ManagedReplica>();
  private readyCount = 0;
  private starting = 0;
  /** Replicas in `starting`, `ready` or `unreachable` (counted against `min`). */
  private live = 0;
  private lastId = 0;
  private accepting = true;
  private closingPromise: Promise<void> | undefined = undefined;
  private readonly drainingError = new RelayError('draining', { headers: { 'retry-after': '5' } });

  private readonly backoff: StartBackoff;
  private readonly idle: IdleStops;
  private backoffTimer: NodeJS.Timeout | undefined = undefined;
  /** Launches in progress; `close()` awaits them. */
  private readonly pending = new Set<Promise<void>>();

  constructor(service: ServiceConfig, deps: ServiceControlDeps) {
    this.slug = service.slug;
    this.service = service;
    this.log = deps.logger;
    this.events = deps.events;
    this.tuning = { ...DEFAULT_TUNING, ...deps.tuning };
    this.views = deps.views;
    const launched = service.replicas.command !== undefined && service.replicas.command.length > 0;
    this.source = launched ? new ProcessSource(service, this.log) : new StaticSource(service);
    // Launched: `max` places, and as many again for replicas gone whose last requests are ending.
    const capacity = launched ? service.replicas.max * 2 + 2 : Math.max(1, (service.replicas.urls ?? []).length);
    this.slots = SlotTable.create(capacity, deps.threads, service.replicas.concurrency);
    this.known = new Int32Array(capacity).fill(-1);
    this.demand = new Demand(service, this.slots, this.known, !launched, (t) => this.views.get(t), this.log, this.events);
    this.health = new Health(service, this.tuning, this.log, this);
    this.backoff = new StartBackoff(this.tuning);
    this.idle = new IdleStops(service, this.slots, this);

    for (const endpoint of this.source.initial()) {
      const r = this.create()!;
      this.place(r, endpoint);
      this.transition(r, 'ready', 'static replica');
    }
    this.scale();
  }

  get closing(): boolean {
    return this.closingPromise !== undefined;
  }

  get scalable(): boolean {
    return this.source.scalable;
  }

  /** An idle replica may be stopped: more than `min` are live and nobody is queued. */
  get canStopIdle(): boolean {
    return this.live > this.service.replicas.min && this.demand.size === 0;
  }

  // ── from the data planes (DemandLink) ──────────────────────────────────────────────────────

  enqueue(thread: number, id: number, arrivedAt: number): void {
    if (!this.accepting) {
      this.slots.addQueued(-1);
      this.views.get(thread)?.fail(id, errorSpec(this.drainingError));
      return;
    }
    if (this.demand.push(thread, id, arrivedAt)) this.scale();
  }

  cancel(thread: number, id: number): void {
    this.demand.cancel(thread, id);
  }

  released(): void {
    this.demand.dispatch();
  }

  unreachable(slot: number, gen: number): void {
    for (const r of this.all) {
      if (r.slot !== slot || r.gen !== gen) continue;
      if (r.state !== 'ready' && r.state !== 'unreachable') return;
      r.failedAt = performance.now();
      if (r.state === 'ready') this.transition(r, 'unreachable', 'connection refused');
      return;
    }
  }

  /** A data plane thread died: the requests it held and queued are given back. */
  threadGone(thread: number): number {
    this.demand.forgetThread(thread);
    const given = this.slots.reclaim(thread);
    this.demand.dispatch();
    return given;
  }

  /** What a new data plane must be told about: every replica with an address. */
  replicas(): ReplicaInfo[] {
    const list: ReplicaInfo[] = [];
    for (const r of this.all) if (r.origin !== '') list.push(this.info(r));
    return list;
  }

  // ── drain and close ────────────────────────────────────────────────────────────────────────

  drain(): void {
    if (!this.accepting) return;
    this.accepting = false;
    this.slots.setAccepting(false);
    if (this.backoffTimer !== undefined) clearTimeout(this.backoffTimer);
    this.backoffTimer = undefined;
    this.log.info({ service: this.slug, queued: this.demand.size }, 'replica set draining');
    this.demand.failAll(this.drainingError, 'draining');
  }

  close(): Promise<void> {
    if (this.closingPromise === undefined) {
      this.drain();
      this.closingPromise = this.shutdown();
    }
    return this.closingPromise;
  }

  private async shutdown(): Promise<void> {
    const exits: Promise<unknown>[] = [];
    for (const r of [...this.all]) {
      if (isLive(r.state)) this.transition(r, 'draining', 'close');
      r.clearTimers();
      if (!r.processGone) exits.push(this.source.stop(r, this.tuning.stopGraceMs));
    }
    await Promise.all(exits);
    await Promise.all([...this.pending]);
    this.health.close();
    this.log.info({ service: this.slug }, 'replica set closed');
  }

  snapshot(): ServiceSnapshot {
    const replicas: ReplicaSnapshot[] = [];
    for (const r of this.all) {
      replicas.push({ id: r.id, state: r.state, inflight: this.slots.inflight(r.slot), origin: r.origin, pid: r.process?.pid });
    }
    return { slug: this.slug, kind: this.source.kind, accepting: this.accepting, queued: this.demand.size, replicas };
  }

  // ── the state machine ──────────────────────────────────────────────────────────────────────

  /** A new replica in `starting` with a slot of its own; undefined when no slot is free. */
  private create(): ManagedReplica | undefined {
    const slot = this.slots.claim();
    if (slot < 0) return undefined;
    const now = performance.now();
    const r = new ManagedReplica(`${this.slug}-${++this.lastId}`, slot, this.slots.gen(slot), now);
    this.all.add(r);
    this.starting++;
    this.live++;
    this.log.info({ service: this.slug, replica: r.id, from: null, to: 'starting', ms: 0, reason: 'created' }, 'replica state');
    this.events?.replicaState(this.slug, r.id, null, 'starting', 0);
    return r;
  }

  /** The replica has an address: every data plane learns it (before it can be ready). */
  private place(r: ManagedReplica, endpoint: Endpoint): void {
    r.origin = endpoint.origin;
    r.host = endpoint.host;
    r.probeHost = endpoint.probeHost;
    r.probePort = endpoint.probePort;
    this.known[r.slot] = r.gen;
    const info = this.info(r);
    for (const view of this.views.all()) view.announce(info);
  }

  private info(r: ManagedReplica): ReplicaInfo {
    return { slot: r.slot, gen: r.gen, id: r.id, origin: r.origin, host: r.host };
  }

  /**
   * THE transition function: checks the move against TRANSITIONS, ends the old state's timers,
   * keeps the counters and the shared slot state, logs `{ service, replica, from, to, ms }` (ms
   * spent in `from`), tells the observer, then runs what entering `to` means.
   */
  transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean {
    const from = r.state;
    if (!canTransition(from, to)) {
      this.log.error({ service: this.slug, replica: r.id, from, to, reason }, 'replica transition refused');
      return false;
    }
    const now = performance.now();
    const ms = Math.round(now - r.since);
    r.state = to;
    r.since = now;
    r.clearTimers();
    if (from === 'starting') this.starting--;
    if (from === 'ready') this.readyCount--;
    if (to === 'ready') this.readyCount++;
    if (isLive(from)) this.live--;
    if (isLive(to)) this.live++;
    this.slots.setState(r.slot, SHARED_STATE[to]);
    if (!this.source.scalable && (from === 'unreachable' || to === 'unreachable')) this.updateFallback();
    const line = { service: this.slug, replica: r.id, from, to, ms, reason, pid: r.process?.pid, ...detail };
    if (to === 'failed') this.log.warn(line, 'replica state');
    else this.log.info(line, 'replica state');
    this.events?.replicaState(this.slug, r.id, from, to, ms);

    switch (to) {
      case 'ready':
        if (from === 'starting') {
          this.backoff.ready(now);
          if (this.source.scalable) this.events?.coldStart(this.slug, r.id, now - r.createdAt);
        }
        r.lastProbe = '';
        if (this.source.scalable) this.idle.arm(r);
        else this.health.scheduleRecheck(r);
        this.demand.dispatch();
        break;
      case 'unreachable':
        this.health.scheduleRecheck(r);
        break;
      case 'draining':
        if (r.processGone) this.transition(r, 'stopped', 'no process to stop');
        else void this.source.stop(r, this.tuning.stopGraceMs); // the exit event moves it to `stopped`
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

  private enterFailed(r: ManagedReplica, from: ReplicaStateName, now: number): void {
    const backoffMs = this.backoff.failed(now);
    if (from === 'starting' && this.readyCount === 0 && this.starting === 0) {
      // Nothing else can serve the queue: every waiter learns it now, not at maxWaitMs.
      const retryAfter = String(Math.max(1, Math.ceil(backoffMs / 1000)));
      this.demand.failAll(new RelayError('no_replica', { message: 'The service replica failed to start.', headers: { 'retry-after': retryAfter } }), 'failed');
    }
    if (r.processGone) this.forget(r);
    else void this.source.stop(r, this.tuning.stopGraceMs); // start timeout: the exit event forgets it
  }

  /** Lets go of a terminal replica whose process is gone: frees its place and its slot. */
  private forget(r: ManagedReplica): void {
    if (!this.all.delete(r)) return;
    this.known[r.slot] = -1;
    this.slots.setState(r.slot, EMPTY);
    if (r.origin !== '') for (const view of this.views.all()) view.gone(r.slot, r.gen);
    this.scale();
  }

  /** Static sets: the replica out of rotation longest, tried when nothing is in rotation. */
  private updateFallback(): void {
    let best: ManagedReplica | undefined;
    for (const r of this.all) if (r.state === 'unreachable' && (best === undefined || r.failedAt < best.failedAt)) best = r;
    this.slots.setFallback(best === undefined ? -1 : best.slot);
  }

  /** The child process exited (or could not be spawned). */
  private onExit(r: ManagedReplica, exit: ProcessExit): void {
    const detail: Record<string, unknown> = { code: exit.code, signal: exit.signal };
    if (exit.error !== undefined) detail['error'] = exit.error.message;
    switch (r.state) {
      case 'starting':
      case 'ready':
      case 'unreachable':
        detail['output'] = r.process?.recentOutput();
        this.transition(r, 'failed', r.state === 'starting' ? 'exited while starting' : 'exited', detail);
        break;
      case 'draining':
        this.transition(r, 'stopped', 'exited', detail);
        break;
      case 'failed':
      case 'stopped':
        // Killed after a start timeout: its place is free now.
        this.log.info({ service: this.slug, replica: r.id, ...detail }, 'replica process exited');
        this.forget(r);
        break;
    }
  }

  // ── scaling ─────────────────────────────────────────────────────────────────────────────────

  /** Starts replicas while the queue or `min` needs them, within `max` and the backoff. */
  private scale(): void {
    if (!this.source.scalable || !this.accepting) return;
    const { min, max, concurrency } = this.service.replicas;
    while (this.all.size < max) {
      const startingTakes = this.starting === 0 ? 0 : concurrency === 0 ? Infinity : this.starting * concurrency;
      const forQueue = this.demand.size > startingTakes;
      if (!forQueue && this.live >= min) return;
      const wait = this.backoff.waitMs(performance.now());
      const r = wait > 0 ? undefined : this.create();
      if (r === undefined) {
        // In a backoff, or every slot still has requests of a replica that is gone: look again soon.
        if (this.backoffTimer === undefined) {
          this.backoffTimer = setTimeout(() => {
            this.backoffTimer = undefined;
            this.scale();
          }, Math.max(10, Math.ceil(wait)));
          this.backoffTimer.unref();
        }
        return;
      }
      const launching = this.launch(r, forQueue ? 'queued requests' : 'min');
      this.pending.add(launching);
      void launching.finally(() => this.pending.delete(launching));
    }
  }

  private async launch(r: ManagedReplica, why: string): Promise<void> {
    let endpoint: Endpoint;
    try {
      endpoint = await this.source.start(r, why, (exit) => this.onExit(r, exit));
    } catch (err) {
      if (r.state !== 'starting') return; // closed meanwhile
      this.log.error({ service: this.slug, replica: r.id, err }, 'replica start failed');
      this.transition(r, 'failed', 'start failed');
      return;
    }
    if (r.state !== 'starting') return;
    this.place(r, endpoint);
    r.startTimer = setTimeout(() => {
      r.startTimer = undefined;
      if (r.state !== 'starting') return;
      this.transition(r, 'failed', 'start timeout', {
        startTimeoutMs: this.service.replicas.startTimeoutMs,
        lastProbe: r.lastProbe,
        output: r.process?.recentOutput(),
      });
    }, this.service.replicas.startTimeoutMs);
    r.startTimer.unref();
    this.health.pollReadiness(r, 0);
  }
}
