// A data plane's view of one service's replicas: the `ReplicaSet` the relay uses. Choosing a
// ready replica with room costs no message between threads.
//
// - Fast path (`acquire`): nobody is queued anywhere and a ready replica has room: one scan of
//   the shared slot table and one atomic increment (slots.ts; a walk of this thread's hash ring
//   first for a request with an affinity value; with prefix-aware routing, a look at each
//   replica's block index for one with prompt blocks), then the waiter gets this thread's
//   connection pool to that replica. No promise, closure, timer or message. Whichever way a
//   request with prompt blocks got its replica (also from the queue), its blocks are recorded in
//   that replica's index by this thread (`handOut`, prefix-index.ts).
// - Slow path: the request waits in the control plane's process-wide queue. It is counted in the
//   table's `queued` first (so every other thread queues behind it), then one message carries it
//   to the control plane, with its priority, its own wait and its affinity hash; the control plane
//   answers with a grant (a slot already counted for this thread) or a failure.
// - A request that will not wait (`maxWaitMs` 0) never queues: `503 no_replica` at once, and when
//   the service is cold (no replica in rotation) one message wakes it (at most one per 100 ms per
//   thread), so a retry finds it warm.
// - While the service is cold and a start has been measured (src/replicas/expected-start.ts), a
//   request whose own wait is shorter than the start's expected time left is refused the same way
//   at once (it would only wait to fail), and both refusals say in `Retry-After` when the replica
//   is expected (docs/api.md#cold-starts-say-when). One read of the shared cell, on the slow path.
// - `release` is an atomic decrement; a message follows only when requests are queued (a slot
//   for the next waiter), the replica is left idle while another service's start waits on its
//   pool (the table's `idleWatched`; docs/configuration.md#pools), the replica refused the
//   connection (out of rotation), or it failed
//   EJECT_AFTER_FAILURES requests in a row (counted in the slot table, by every thread; the
//   control plane decides on ejection, ejections.ts). An answer resets the count with one read.
// - A service that reads loads counts, on the upstream ticks, its requests overdue for their
//   status line into the slot table (`addOverdue`), where they weigh in the replica's score.
// - Each thread has its own connection pools, created in one place (`announce`) with
//   `createPool(origin, service)` and closed when the control plane says the replica is gone, and
//   its own affinity ring, rebuilt at the same two moments.
import type { ServiceConfig } from '../config/types.js';
import { drainingError, RelayError } from '../http/errors.js';
import type { Logger } from '../log/logger.js';
import { type DemandLink, type ErrorSpec, errorFromSpec, type ReplicaInfo, type ViewLink } from '../threads/link.js';
import { AffinityRing, NO_AFFINITY } from '../replicas/affinity-ring.js';
import type { PrefixIndex } from '../replicas/prefix-index.js';
import { sharedClock } from '../replicas/clock.js';
import { wholeSeconds } from '../replicas/expected-start.js';
import { BUSY, EJECTED, READY, type SlotTable } from '../replicas/slots.js';
import type { Readiness, Replica, ReplicaSet, ReplicaWaiter } from '../relay/replica-set.js';
import type { ReleaseOutcome } from '../replicas/outcomes.js';
import { hostAndPort } from '../http/syntax.js';
import { type OverdueSink, type PoolOptions, UpstreamPool } from '../upstream/pool.js';
import { settlesWithin } from '../time/bounded-wait.js';
import { EJECT_AFTER_FAILURES } from '../tunables.js';

/** How long a TCP connect to a replica may take before it counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Wake messages of one thread for a cold service: at most one per this many ms. */
const WAKE_EVERY_MS = 100;

/** One replica as this thread uses it. */
class LocalReplica implements Replica {
  constructor(
    readonly id: string,
    readonly origin: string,
    readonly host: string,
    readonly pool: UpstreamPool,
    readonly slot: number,
    readonly gen: number,
    private readonly slots: SlotTable,
  ) {}

  /** Requests on it from every thread. */
  get inflight(): number {
    return this.slots.inflight(this.slot);
  }
}

export class ReplicaView implements ReplicaSet, ViewLink {
  readonly slug: string;
  /** Generation of the replica this thread knows per slot (-1: none), read by `take`. */
  private readonly known: Int32Array;
  private readonly bySlot: (LocalReplica | undefined)[];
  /** Queued requests of this thread, by the id the control plane knows them by. */
  private readonly waiting = new Map<number, ReplicaWaiter>();
  private readonly ids = new Map<ReplicaWaiter, number>();
  private lastId = 0;
  private readonly closing = new Set<Promise<void>>();
  private readonly drainingError = drainingError();
  private readonly noOtherReplicaError = new RelayError('upstream_unavailable', {
    message: 'The service replica could not be reached and no other replica is ready.',
    retryable: false,
  });
  private readonly noWaitError = new RelayError('no_replica', {
    message: 'No replica of the service could take the request at once, and it asked not to wait (X-Sluice-Max-Wait-Ms: 0).',
    headers: { 'retry-after': '1' },
  });
  /** `routing.affinityHeader`: this thread's ring over the replicas it knows. */
  private readonly ring: AffinityRing | undefined;
  private readonly maxLoad: number;
  /** `replicas.keepAliveMaxMs`: the longest `X-Sluice-Keep-Alive` honoured (0: none). */
  private readonly keepAliveMaxMs: number;
  /** `routing.prefix`: the service's block indexes, or undefined. */
  private readonly prefix: PrefixIndex | undefined;
  /** performance.now() of the last wake message. */
  private wokeAt = -Infinity;

  constructor(
    private readonly service: ServiceConfig,
    private readonly slots: SlotTable,
    /** This thread's row in the slot table. */
    private readonly thread: number,
    private readonly link: DemandLink,
    /** The kind starts replicas on demand (its policy's answer, src/control/service/kind-policy.ts):
     *  a cold service queues, and so does the retry after a refused connection, instead of failing. */
    private readonly queuesForColdStart: boolean,
    private readonly log: Logger,
    /** How long closing a gone replica's pool waits for its requests (control/service/tuning.ts). */
    private readonly poolCloseMs: number,
  ) {
    this.slug = service.slug;
    this.known = new Int32Array(slots.slots).fill(-1);
    this.bySlot = new Array<LocalReplica | undefined>(slots.slots).fill(undefined);
    this.ring = service.routing.affinityHeader === undefined ? undefined : new AffinityRing();
    this.maxLoad = service.routing.affinityMaxLoad;
    this.keepAliveMaxMs = service.replicas.keepAliveMaxMs;
    this.prefix = service.routing.prefix === undefined ? undefined : slots.prefix;
  }

  // ── ReplicaSet: the relay's side ───────────────────────────────────────────────────────────

  /**
   * `ready` while a replica is in rotation (or ejected for a backoff), `starting` while one is
   * being started or stopped or requests wait for one, else `cold`: a read of the slot table, no
   * message, no clock (a router's model list, docs/api.md#routers).
   */
  readiness(): Readiness {
    const slots = this.slots;
    let busy = false;
    for (let s = 0; s < slots.slots; s++) {
      const state = slots.state(s);
      if (state === READY || state === EJECTED) return 'ready';
      if (state === BUSY) busy = true;
    }
    return busy || slots.queued > 0 ? 'starting' : 'cold';
  }

  acquire(waiter: ReplicaWaiter, exclude?: Replica): void {
    const slots = this.slots;
    if (!slots.accepting) {
      waiter.onNoReplica(this.drainingError);
      return;
    }
    if (exclude !== undefined) {
      // The retry after `unreachable`: another replica that is ready now. Failing that, a set that
      // queues for a cold start queues the request (its replica is probably dying and will be
      // replaced); another (static) answers 502 at once.
      const slot = slots.take(this.thread, this.known, (exclude as LocalReplica).slot, false);
      if (slot >= 0) this.handOut(waiter, slot);
      else if (this.queuesForColdStart && waiter.maxWaitMs !== 0) this.enqueue(waiter);
      else waiter.onNoReplica(this.noOtherReplicaError);
      return;
    }
    const stateId = waiter.stateId;
    if (stateId !== undefined) {
      // The replica holding the state named, before the queue's order and the affinity header: no
      // other replica can answer it.
      const held = slots.ids.find(stateId);
      if (held >= 0 && slots.takeSlot(this.thread, this.known, held, slots.ids.gen) >= 0) {
        this.handOut(waiter, held);
        return;
      }
    }
    if (slots.queued === 0) {
      // An affinity value the caller sent wins over the prompt's blocks.
      const prompt = waiter.prefix;
      const slot =
        this.ring !== undefined && waiter.affinity !== NO_AFFINITY
          ? slots.takeNear(this.thread, this.known, this.ring, waiter.affinity, this.maxLoad, !this.queuesForColdStart)
          : this.prefix !== undefined && prompt !== undefined
            ? slots.takePrefix(this.thread, this.known, prompt, this.maxLoad, !this.queuesForColdStart)
            : slots.take(this.thread, this.known, -1, !this.queuesForColdStart);
      if (slot >= 0) {
        this.handOut(waiter, slot);
        return;
      }
    }
    const left = waiter.maxWaitMs < 0 ? -1 : this.expectedReadyInMs();
    if (waiter.maxWaitMs === 0 || (waiter.maxWaitMs > 0 && left > waiter.maxWaitMs)) {
      this.refuseWait(waiter, left);
      return;
    }
    this.enqueue(waiter);
  }

  /** Gives the waiter the replica in `slot` (room already taken), its prompt blocks recorded there first. */
  private handOut(waiter: ReplicaWaiter, slot: number): void {
    if (this.prefix !== undefined && waiter.prefix !== undefined) this.prefix.record(slot, waiter.prefix);
    waiter.onReplica(this.bySlot[slot]!);
  }

  /** The expected time left of the service's cold start in ms, or -1 (not cold, or no start measured yet). */
  expectedReadyInMs(): number {
    return this.queuesForColdStart ? this.slots.startLeftMs() : -1;
  }

  queuedNow(): number {
    return this.slots.queued;
  }

  /**
   * A request that will not wait, or not as long as the start is expected to take (`left`), and
   * found no replica with room: 503 now, and wake a cold service.
   */
  private refuseWait(waiter: ReplicaWaiter, left: number): void {
    if (this.queuesForColdStart && !this.slots.hasReady()) {
      const now = performance.now();
      if (now - this.wokeAt >= WAKE_EVERY_MS) {
        this.wokeAt = now;
        this.link.wake();
      }
    }
    waiter.onNoReplica(left < 0 ? this.noWaitError : this.refusalWhileStarting(waiter.maxWaitMs, wholeSeconds(left)));
  }

  /** `503 no_replica` for a request that would not wait `retryAfter` seconds for the start (`maxWaitMs`: its own wait). */
  private refusalWhileStarting(maxWaitMs: number, retryAfter: number): RelayError {
    const message =
      maxWaitMs === 0
        ? this.noWaitError.message
        : `No replica of the service is expected to be ready within the request's X-Sluice-Max-Wait-Ms (${maxWaitMs} ms): the replica starting is expected in about ${retryAfter} s.`;
    return new RelayError('no_replica', { message, headers: { 'retry-after': String(retryAfter) } });
  }

  learnState(replica: Replica, id: string): void {
    const r = replica as LocalReplica;
    this.slots.ids.learn(id, r.slot, r.gen);
  }

  cancel(waiter: ReplicaWaiter): boolean {
    const id = this.ids.get(waiter);
    if (id === undefined) return false;
    this.ids.delete(waiter);
    this.waiting.delete(id);
    this.link.cancel(this.thread, id);
    return true;
  }

  release(replica: Replica, outcome: ReleaseOutcome, keepAliveMs = 0): void {
    const r = replica as LocalReplica;
    const slots = this.slots;
    if (keepAliveMs > 0 && this.keepAliveMaxMs > 0) slots.keepLoaded(r.slot, Date.now() + Math.min(keepAliveMs, this.keepAliveMaxMs));
    const emptied = slots.release(this.thread, r.slot);
    if (outcome === 'ok') slots.answered(r.slot);
    else if (outcome === 'unreachable' || outcome === 'reset' || outcome === 'timeout') this.failedOn(r, outcome);
    // Also when the replica is now idle while another service's start waits on its pool (one read, only then).
    if (slots.queued > 0 || (emptied && slots.idleWatched)) this.link.released();
  }

  /** A failure before the replica's status line: counted, and reported once the count reaches the threshold. */
  private failedOn(r: LocalReplica, outcome: 'unreachable' | 'reset' | 'timeout'): void {
    if (this.slots.failed(r.slot) >= EJECT_AFTER_FAILURES) this.link.failing(r.slot, r.gen, outcome === 'unreachable' ? 'refused' : outcome);
    if (outcome === 'unreachable') this.link.unreachable(r.slot, r.gen);
  }

  /** The control plane drains the service (queued requests hear it from there). */
  drain(): void {}

  /** Closes this thread's connection pools. */
  async close(): Promise<void> {
    for (let slot = 0; slot < this.bySlot.length; slot++) {
      const r = this.bySlot[slot];
      if (r !== undefined) this.gone(slot, r.gen);
    }
    await Promise.all([...this.closing]);
  }

  private enqueue(waiter: ReplicaWaiter): void {
    const id = ++this.lastId;
    this.waiting.set(id, waiter);
    this.ids.set(waiter, id);
    this.slots.addQueued(1);
    this.link.enqueue(this.thread, id, sharedClock(), waiter.priority, waiter.maxWaitMs, this.ring === undefined ? NO_AFFINITY : waiter.affinity);
  }

  // ── ViewLink: the control plane's side ─────────────────────────────────────────────────────

  announce(info: ReplicaInfo): void {
    const old = this.bySlot[info.slot];
    if (old !== undefined && old.gen === info.gen) return;
    if (old !== undefined) this.gone(info.slot, old.gen);
    const pool = createPool(info.origin, this.service, this.service.replicas.load === undefined ? undefined : new OverdueCell(this.slots, this.thread, info.slot));
    this.bySlot[info.slot] = new LocalReplica(info.id, info.origin, info.host, pool, info.slot, info.gen, this.slots);
    this.known[info.slot] = info.gen;
    this.ring?.set(info.slot, info.origin);
  }

  gone(slot: number, gen: number): void {
    const r = this.bySlot[slot];
    if (r === undefined || r.gen !== gen) return;
    this.bySlot[slot] = undefined;
    this.known[slot] = -1;
    this.ring?.delete(slot);
    const closing = closePool(r.pool, this.poolCloseMs);
    this.closing.add(closing);
    void closing.finally(() => this.closing.delete(closing));
  }

  grant(id: number, slot: number): void {
    const waiter = this.waiting.get(id);
    const replica = this.bySlot[slot];
    if (waiter === undefined || replica === undefined) {
      // Its caller left while the grant was on its way: the slot goes back (to the next waiter).
      this.slots.release(this.thread, slot);
      if (this.slots.queued > 0) this.link.released();
      if (waiter !== undefined) this.fail(id, { code: 'upstream_unavailable', message: this.noOtherReplicaError.message });
      return;
    }
    this.waiting.delete(id);
    this.ids.delete(waiter);
    try {
      this.handOut(waiter, slot);
    } catch (err) {
      this.log.error({ service: this.slug, replica: replica.id, err }, 'waiter threw from onReplica');
    }
  }

  fail(id: number, spec: ErrorSpec): void {
    const waiter = this.waiting.get(id);
    if (waiter === undefined) return;
    this.waiting.delete(id);
    this.ids.delete(waiter);
    try {
      waiter.onNoReplica(errorFromSpec(spec));
    } catch (err) {
      this.log.error({ service: this.slug, err }, 'waiter threw from onNoReplica');
    }
  }
}

/** `close()` (let requests finish) bounded by `ms`, then `destroy()`. Never rejects. */
async function closePool(pool: UpstreamPool, ms: number): Promise<void> {
  if (!(await settlesWithin(pool.close(), ms))) pool.destroy();
}

/**
 * This thread's connection pool to the replica at `origin` (`http://host:port`, as the config
 * loader validated it), with the service's timeouts: one request per connection at a time (no
 * pipelining), at most `concurrency` connections.
 */
function createPool(origin: string, service: ServiceConfig, overdue: OverdueSink | undefined): UpstreamPool {
  const { host, port } = hostAndPort(new URL(origin));
  const options: PoolOptions = {
    maxConnections: service.replicas.concurrency,
    connectMs: CONNECT_TIMEOUT_MS,
    headersMs: service.timeouts.responseHeadersMs,
    bodyIdleMs: service.timeouts.bodyIdleMs,
  };
  if (overdue !== undefined) {
    // A request waiting longer than a reading interval for its status line is overdue.
    options.overdueMs = service.replicas.load!.intervalMs;
    options.overdue = overdue;
  }
  return new UpstreamPool(host, port, options);
}

/** This thread's count of a replica's requests overdue for a status line, in the slot table. */
class OverdueCell implements OverdueSink {
  constructor(
    private readonly slots: SlotTable,
    private readonly thread: number,
    private readonly slot: number,
  ) {}

  overdue(delta: number): void {
    this.slots.addOverdue(this.thread, this.slot, delta);
  }
}
