// One service's replicas on the control plane (main thread): the state machine, the queue, idle
// stops, drain and close, the same for every kind of replicas. What differs by kind (one folder
// each in src/control/kinds/) is asked of the kind's policy (kind-policy.ts): slot capacity,
// whether a cold service queues, whether ready replicas are probed, the panic fallback, what
// entering a state means, how to scale. The data planes choose replicas by reading the shared
// slot table this class writes (src/replicas/slots.ts; what they read: routing-inputs.ts); they reach it
// only for the queue (demand.ts), for what they learned (a refused connection) and to wake a cold
// service.
//
// Decisions:
//
// - The queue's order rules (demand.ts); a request that will not wait wakes a cold service
//   (`wake`: it scales as for one queued request, see demand.ts and replica-view.ts) when the
//   kind queues for a cold start.
// - A failed start: every queued request gets `503 no_replica` (Retry-After = the backoff) at
//   once, unless another replica is ready or still starting. The next start waits a backoff:
//   250 ms, doubling per consecutive failure up to 5 s; the count resets once a replica has stayed
//   ready for 10 s, so a crash loop after readiness backs off too.
// - `unreachable` (connection refused before any byte was sent) takes the replica out of
//   rotation, for every kind, and probes it every 500 ms until it answers (unless its kind holds it
//   out). Nothing is stopped for it: a refused connection can be a keep-alive race.
// - Consecutive failures (refused, reset, status-line deadline) eject a replica for a backoff,
//   for every kind (ejections.ts); its state stays, its shared slot says EJECTED.
// - With the kind's panic fallback, when every replica is out of rotation the one
//   taken out longest ago is written into the slot table to be handed out anyway.
//
// Who holds a place, the counts and what the data planes were told are the roster's books
// (replica-roster.ts), kept by the transition function here.
import type { PrefixCounts } from '../../replicas/prefix-index.js';
import type { ServiceConfig, TokenConfig } from '../../config/types.js';
import { drainingError, RelayError } from '../../http/errors.js';
import type { Logger } from '../../log/logger.js';
import { errorSpec, type ReplicaInfo } from '../../threads/link.js';
import type { ReplicaSnapshot, ServiceControlDeps, ServiceSnapshot, ViewRouter } from './control-types.js';
import { SlotControl } from '../../replicas/slot-control.js';
import { BUSY, OUT, READY, SlotTable } from '../../replicas/slots.js';
import type { Endpoint } from '../sources/source.js';
import { RoutingInputs } from './routing-inputs.js';
import { Demand } from './demand.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import { Ejections } from './ejections.js';
import { Health } from './health.js';
import type { KindOptions, ReplicaHost, ReplicaKindPolicy } from './kind-policy.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { FailureReason } from '../../replicas/outcomes.js';
import { type ManagedReplica, canTransition, isLive } from './replica.js';
import { ReplicaRoster } from './replica-roster.js';
import { DEFAULT_TUNING, StartBackoff, type ReplicaSetTuning } from './tuning.js';
import { earliestStarting, StartEstimate } from './start-estimate.js';

const SHARED_STATE: Record<ReplicaStateName, number> = { starting: BUSY, ready: READY, unreachable: OUT, draining: BUSY, stopped: BUSY, failed: BUSY };

export class ServiceControl implements ReplicaHost {
  readonly slug: string;
  readonly slots: SlotControl;
  /** The data planes' view of the same memory: the grants take room through it for the thread they go to (and with `workers: 1` the local data plane, so both rotate as one thread). */
  readonly dataView: SlotTable;
  /** The kind's name, for /status. */
  readonly kind: string;
  readonly service: ServiceConfig;
  readonly log: Logger;
  readonly events: ReplicaEvents | undefined;
  readonly tuning: ReplicaSetTuning;
  readonly health: Health;
  readonly options: KindOptions;
  private readonly views: ViewRouter;
  private readonly demand: Demand;
  private readonly ejections: Ejections;
  /** The replicas holding a place, their counts, and what the data planes were told. */
  private readonly roster: ReplicaRoster;
  private acceptingRequests = true;
  private closingPromise: Promise<void> | undefined = undefined;
  private readonly drainingError = drainingError();

  private readonly backoff: StartBackoff;
  /** Recent start durations and the expected end of a cold start, published to every thread. */
  private readonly starts: StartEstimate;
  /** What the kind of replicas decides (kind-policy.ts). */
  private readonly policy: ReplicaKindPolicy;
  /** Load readings and the affinity ring. */
  private readonly routingInputs: RoutingInputs;

  constructor(service: ServiceConfig, deps: ServiceControlDeps) {
    this.slug = service.slug;
    this.service = service;
    this.log = deps.logger;
    this.events = deps.events;
    this.tuning = { ...DEFAULT_TUNING, ...deps.tuning };
    this.views = deps.views;
    this.options = deps.kindOptions ?? {};
    const kind = deps.kind;
    this.kind = kind.name;
    const { concurrency, load } = service.replicas;
    this.slots = SlotControl.create(kind.slotCapacity(service), deps.threads, concurrency, load !== undefined, service.routing.prefix?.indexSize ?? 0);
    this.roster = new ReplicaRoster(this.slug, this.slots, this.views);
    const all = this.roster.all;
    this.routingInputs = new RoutingInputs(service, this.slots, () => all, this.log, this.events);
    this.health = new Health(service, this.tuning, this.log, this);
    this.ejections = new Ejections(this.slug, this.slots, this.tuning, this.log, this.events, {
      replicas: () => all,
      returned: () => this.demand.dispatch(),
    });
    this.backoff = new StartBackoff(this.tuning);
    this.starts = new StartEstimate(this.slots.start);
    this.policy = kind.policy(service, this);
    this.dataView = new SlotTable(this.slots.init);
    this.demand = new Demand(service, this.dataView, this.roster.known, this.policy.panicFallback, (t) => this.views.get(t), this.log, this.events, this.routingInputs.affinity);
    this.policy.start();
    this.scale();
  }

  get closing(): boolean {
    return this.closingPromise !== undefined;
  }

  /** A cold service queues while its kind starts replicas (the data planes are told: WorkerInit). */
  get queuesForColdStart(): boolean {
    return this.policy.queuesForColdStart;
  }

  /** For Health: the kind probes its ready replicas. */
  get probesWhenReady(): boolean {
    return this.policy.probesWhenReady;
  }

  /** For Health: how long this service's recent starts took (-1: none measured). */
  get expectedStartMs(): number {
    return this.starts.estimateMs;
  }

  /** For Health: the kind holds `r` out of rotation (no recovery probe). */
  heldOut(r: ManagedReplica): boolean {
    return this.policy.heldOut(r);
  }

  get accepting(): boolean {
    return this.acceptingRequests;
  }

  get queued(): number {
    return this.demand.size;
  }

  /** What scaling serves (a kind that scales elsewhere reports it): see Demand.wanted. */
  get demanded(): number {
    return this.demand.wanted(this.roster.ready);
  }

  get readyReplicas(): number {
    return this.roster.ready;
  }

  /** An idle replica may be stopped: more than `min` are live and nobody is queued. */
  get canStopIdle(): boolean {
    return this.roster.live > this.service.replicas.min && this.demand.size === 0;
  }

  // ── from the data planes (DemandLink) ──────────────────────────────────────────────────────

  enqueue(thread: number, id: number, arrivedAt: number, priority = 0, maxWaitMs = -1, affinity = -1): void {
    if (!this.acceptingRequests) {
      this.slots.addQueued(-1);
      this.views.get(thread)?.fail(id, errorSpec(this.drainingError));
      return;
    }
    if (this.demand.push(thread, id, arrivedAt, priority, maxWaitMs, affinity)) this.scale();
  }

  wake(): void {
    if (!this.acceptingRequests || !this.policy.queuesForColdStart || this.roster.ready > 0) return;
    this.demand.wake();
    this.scale();
  }

  // ── on demand (the admin listener's load and unload: src/admin/on-demand.ts) ─────────────────

  /**
   * Starts a replica ahead of traffic as a request that will not wait would (`wake`, held for
   * `queue.maxWaitMs`); the service's state after: `ready` (nothing to do), `starting`, `cold`
   * (its kind starts nothing: static) or `draining`.
   */
  preload(): 'ready' | 'starting' | 'cold' | 'draining' {
    if (!this.acceptingRequests) return 'draining';
    if (this.roster.ready > 0) return 'ready';
    this.wake();
    return this.roster.starting > 0 || this.demand.wanted(0) > 0 ? 'starting' : 'cold';
  }

  /** Stops the idle replicas now (a wake in force ends too); undefined when the kind does not stop replicas on demand. */
  unload(): { stopped: string[]; kept: string[] } | undefined {
    if (this.policy.unloadIdle === undefined) return undefined;
    this.demand.cancelWake();
    return this.policy.unloadIdle();
  }

  /** SIGHUP reloaded the service's tokens: the queue keeps their priorities' depth series. */
  tokensReloaded(tokens: readonly TokenConfig[]): void {
    this.demand.tokensReloaded(tokens);
  }

  cancel(thread: number, id: number): void {
    this.demand.cancel(thread, id);
  }

  released(): void {
    this.demand.dispatch();
    // A replica may have become idle while another service's start waits on the pool.
    if (this.slots.idleWatched) this.scale();
  }

  unreachable(slot: number, gen: number): void {
    const r = this.roster.find(slot, gen);
    if (r === undefined || (r.state !== 'ready' && r.state !== 'unreachable')) return;
    r.failedAt = performance.now();
    if (r.state === 'ready') this.transition(r, 'unreachable', 'connection refused');
  }

  failing(slot: number, gen: number, reason: FailureReason): void {
    const r = this.roster.find(slot, gen);
    if (r !== undefined) this.ejections.failing(r, reason);
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
    return this.roster.infos();
  }

  // ── drain and close ────────────────────────────────────────────────────────────────────────

  drain(): void {
    if (!this.acceptingRequests) return;
    this.acceptingRequests = false;
    this.slots.setAccepting(false);
    this.policy.drain();
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
    for (const r of [...this.roster.all]) {
      if (isLive(r.state)) this.transition(r, 'draining', 'close');
      r.clearTimers();
    }
    await this.policy.close(this.tuning.stopGraceMs);
    this.health.close();
    this.routingInputs.close();
    this.log.info({ service: this.slug }, 'replica set closed');
  }

  /** Prefix-aware routing's expected hits, the service's (replica null) and each replica's (metrics). */
  prefixHits(): { replica: string | null; hits: PrefixCounts }[] {
    return this.routingInputs.prefixHits();
  }

  snapshot(): ServiceSnapshot {
    const replicas: ReplicaSnapshot[] = [];
    for (const r of this.roster.all) {
      const load = this.routingInputs.load(r);
      const ejection = this.ejections.snapshot(r);
      replicas.push({ id: r.id, state: r.state, inflight: this.slots.inflight(r.slot), origin: r.origin, pid: this.policy.pid(r), ...(load === undefined ? {} : { load }), ...(ejection === undefined ? {} : { ejection }) });
    }
    const expectedStartMs = this.starts.estimateMs < 0 ? null : this.starts.estimateMs;
    return { slug: this.slug, kind: this.kind, accepting: this.acceptingRequests, queued: this.demand.size, routing: this.routingInputs.status(), expectedStartMs, replicas };
  }

  // ── the state machine ──────────────────────────────────────────────────────────────────────

  /** A new replica in `starting` with a slot of its own; undefined when no slot is free. */
  create(): ManagedReplica | undefined {
    const r = this.roster.enlist();
    if (r === undefined) return undefined;
    this.log.info({ service: this.slug, replica: r.id, from: null, to: 'starting', ms: 0, reason: 'created' }, 'replica state');
    this.events?.replicaState(this.slug, r.id, null, 'starting', 0);
    this.publishStart();
    return r;
  }

  /** The replica has an address: every data plane learns it (before it can be ready). */
  place(r: ManagedReplica, endpoint: Endpoint): void {
    this.roster.place(r, endpoint);
    this.routingInputs.placed(r);
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
    this.roster.moved(from, to);
    if (from === 'ready') this.routingInputs.leftRotation(r);
    this.slots.setState(r.slot, to === 'ready' ? this.ejections.readyState(r, from) : SHARED_STATE[to]);
    if (!isLive(to)) this.ejections.forget(r);
    if (this.policy.panicFallback && (from === 'unreachable' || to === 'unreachable')) this.roster.updateFallback();
    const line = { service: this.slug, replica: r.id, from, to, ms, reason, pid: this.policy.pid(r), ...detail };
    if (to === 'failed') this.log.warn(line, 'replica state');
    else this.log.info(line, 'replica state');
    this.events?.replicaState(this.slug, r.id, from, to, ms);

    switch (to) {
      case 'ready':
        if (from === 'starting') this.backoff.ready(now);
        this.demand.cancelWake(); // a wake holds until a replica is ready, not past its idle stop
        r.lastProbe = '';
        break;
      case 'unreachable':
        this.health.scheduleRecheck(r);
        break;
      case 'failed':
        this.failed(from, now);
        break;
      default:
        break;
    }
    // What entering `to` means for the kind (arm an idle stop, stop a process, ...).
    this.policy.entered(r, from, to, now);
    this.publishStart();
    if (to === 'ready') this.demand.dispatch();
    else if (to === 'stopped') this.forget(r);
    return true;
  }

  /** A replica failed: a failed start backs off the next, and may fail every waiter now. */
  private failed(from: ReplicaStateName, now: number): void {
    const backoffMs = this.backoff.failed(now);
    if (from === 'starting' && this.roster.ready === 0 && this.roster.starting === 0) {
      // Nothing else can serve the queue: every waiter learns it now, not at maxWaitMs.
      this.demand.cancelWake(); // the next request tries again
      const retryAfter = String(Math.max(1, Math.ceil(backoffMs / 1000)));
      this.demand.failAll(new RelayError('no_replica', { message: 'The service replica failed to start.', headers: { 'retry-after': retryAfter } }), 'failed');
    }
  }

  /** Lets go of a terminal replica whose process is gone: frees its place and its slot. */
  forget(r: ManagedReplica): void {
    if (!this.roster.remove(r)) return;
    this.routingInputs.forgotten(r);
    this.scale();
  }

  // ── scaling ─────────────────────────────────────────────────────────────────────────────────

  /** The queue or the replicas changed: the kind starts replicas, or reports the demand. */
  private scale(): void {
    this.policy.demandChanged();
    this.publishStart();
  }

  /** For the kind's policy (ReplicaHost): a start took `ms`, from being asked for to ready. */
  startMeasured(ms: number): void {
    this.starts.measured(ms);
  }

  /** When a cold start is expected to end, for every thread (start-estimate.ts). */
  private publishStart(): void {
    if (this.starts.estimateMs < 0) return;
    const cold = this.roster.ready === 0;
    this.starts.publish(cold, cold ? (this.policy.startAskedAt?.() ?? earliestStarting(this.roster.all)) : -1, this.roster.live === 0);
  }

  /** For the kind's policy (ReplicaHost). */
  counts(): { places: number; starting: number; live: number; queued: number } {
    const roster = this.roster;
    return { places: roster.all.size, starting: roster.starting, live: roster.live, queued: this.demand.wanted(roster.ready) };
  }

  backoffWaitMs(): number {
    return this.backoff.waitMs(performance.now());
  }

  firstWaiting(): { priority: number; arrivedAt: number } | undefined {
    return this.demand.first();
  }
}
