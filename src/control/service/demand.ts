// The process-wide queue of one service: requests from every worker that found no ready replica
// with room wait here, bounded by `queue.maxRequests` for the whole process and each by its
// deadline (`queue.maxWaitMs`, or a lower wait the caller asked for). When a slot frees up, the
// request that should go next anywhere gets it — the highest priority, and among equals the
// oldest: the grant takes the slot in the shared table on the waiter's thread's behalf (on its
// session's replica when it has an affinity value) and tells that thread which replica it has.
//
// A full queue: an arrival whose priority is higher than the last waiter's (the most recent
// arrival among the lowest priority) takes its place, and that waiter gets `503 queue_full` with
// a message of its own (docs/api.md#errors: it was queued, then displaced); otherwise the arrival
// gets `queue_full`.
//
// The queue's order rules across workers: while anyone is queued anywhere in the process, a new
// request queues too (the slot table's `queued`), whatever its priority. A worker cannot know the
// priorities of requests whose enqueue messages are still on their way, so letting a higher
// arrival take a free slot directly could put it ahead of a higher one in flight; through the
// queue it costs one message each way, and the slot goes to the request that should go next.
//
// While the service is cold and a start has been measured, its `queue_full` and `no_replica`
// answers say when to come back: `Retry-After` is the expected time left of the start
// (src/replicas/expected-start.ts), not the fixed seconds.
//
// A request that will not wait (`X-Sluice-Max-Wait-Ms: 0`) never queues; when it found the
// service cold its thread says so, and the service is `wanted` as if one request were queued, for
// up to `queue.maxWaitMs` or until a replica is ready, so a retry finds it warm.
import type { ServiceConfig, TokenConfig } from '../../config/types.js';
import { RelayError } from '../../http/errors.js';
import type { Logger } from '../../log/logger.js';
import type { AffinityRing } from '../../replicas/affinity-ring.js';
import { type ErrorSpec, errorSpec, type ViewLink } from '../../threads/link.js';
import { sharedClock } from '../../replicas/clock.js';
import { wholeSeconds } from '../../replicas/expected-start.js';
import { type QueuedWaiter, WaiterQueue } from './queue.js';
import type { SlotTable } from '../../replicas/slots.js';
import type { QueueOutcome, ReplicaEvents } from '../../replicas/events.js';

/** Retry-After (seconds) for `queue_full`: the queue moves as soon as replicas free up. */
const QUEUE_FULL_RETRY_AFTER_S = 1;

/** Retry-After (seconds) for `no_replica` after the wait ran out. */
const WAIT_EXPIRED_RETRY_AFTER_S = 5;

/** A queued request: its thread and its id there, in one number (the queue's key). */
const ID_SPAN = 2 ** 32;
const keyOf = (thread: number, id: number): number => thread * ID_SPAN + id;
const threadOf = (key: number): number => Math.floor(key / ID_SPAN);
const idOf = (key: number): number => key % ID_SPAN;

/** Session affinity as the grants use it: the control plane's ring and the load bound. */
export interface GrantAffinity {
  ring: AffinityRing;
  maxLoad: number;
}

export class Demand {
  private readonly queue: WaiterQueue<number>;
  private readonly queueFull: ErrorSpec;
  /** What a waiter a higher-priority arrival displaced is told: `queue_full`, saying so. */
  private readonly displacedSpec: ErrorSpec;
  private readonly waitExpired: ErrorSpec;
  private readonly known: Int32Array;
  /** Queued requests per priority, for `sluice_queue_depth{priority}`. */
  private readonly atPriority = new Map<number, number>();
  /** The priorities of the service's tokens (and 0): their depth series stay at 0 when empty. */
  private kept: ReadonlySet<number>;
  /** Affinity hashes of queued requests that have one. */
  private readonly affinityOf = new Map<number, number>();
  private dispatching = false;
  /** Until when (performance.now()) a request that would not wait wants a replica. */
  private wakeUntil = 0;
  /** When (sharedClock()) that request came. */
  private wokenAt = 0;

  constructor(
    private readonly service: ServiceConfig,
    private readonly slots: SlotTable,
    /** The slots the control plane has announced (generation per slot, -1 none). */
    known: Int32Array,
    /** Static sets hand out the panic fallback too (see service-control.ts). */
    private readonly fallback: boolean,
    private readonly views: (thread: number) => ViewLink | undefined,
    private readonly log: Logger,
    private readonly events: ReplicaEvents | undefined,
    private readonly affinity: GrantAffinity | undefined = undefined,
  ) {
    this.known = known;
    this.kept = keptPriorities(service.tokens);
    this.queue = new WaiterQueue<number>(service.queue.maxRequests, service.queue.maxWaitMs, (key, waitedMs, entry) => this.expired(key, waitedMs, entry));
    this.queueFull = errorSpec(
      new RelayError('queue_full', {
        message: `The service queue is full (${service.queue.maxRequests} requests); retry later.`,
        headers: { 'retry-after': String(QUEUE_FULL_RETRY_AFTER_S) },
      }),
    );
    this.displacedSpec = errorSpec(
      new RelayError('queue_full', {
        message: "The queue is full and a higher-priority request took this request's place.",
        headers: { 'retry-after': String(QUEUE_FULL_RETRY_AFTER_S) },
      }),
    );
    this.waitExpired = this.expiredSpec(service.queue.maxWaitMs);
  }

  get size(): number {
    return this.queue.size;
  }

  /** What scaling serves: the queued requests, plus one while a wake holds and no replica is ready. */
  wanted(readyReplicas: number): number {
    return this.queue.size + (readyReplicas === 0 && this.wakeUntil > performance.now() ? 1 : 0);
  }

  /** A request that would not wait found the service cold. */
  wake(): void {
    this.wakeUntil = performance.now() + this.service.queue.maxWaitMs;
    this.wokenAt = sharedClock();
  }

  /** The request that goes first (its priority and arrival), or a wake in force (priority 0); undefined: none. */
  first(): { priority: number; arrivedAt: number } | undefined {
    const entry = this.queue.first();
    if (entry !== undefined) return { priority: entry.priority, arrivedAt: entry.enqueuedAt };
    return this.wakeUntil > performance.now() ? { priority: 0, arrivedAt: this.wokenAt } : undefined;
  }

  /** A start failed with nothing else coming: the wake is over (the next request tries again). */
  cancelWake(): void {
    this.wakeUntil = 0;
  }

  /**
   * A request to queue, with its priority, its own wait (-1: the service's) and affinity hash
   * (-1: none); false when it was refused (it has been told `queue_full`).
   */
  push(thread: number, id: number, arrivedAt: number, priority = 0, maxWaitMs = -1, affinity = -1): boolean {
    const key = keyOf(thread, id);
    if (this.queue.full) {
      const displaced = this.queue.displaceFor(priority);
      if (displaced === undefined) {
        this.slots.addQueued(-1);
        this.views(thread)?.fail(id, this.whileStarting(this.queueFull));
        return false;
      }
      this.left(displaced, 'displaced');
      const waitedMs = Math.round(sharedClock() - displaced.enqueuedAt);
      this.log.info({ service: this.service.slug, priority: displaced.priority, for: priority, waitedMs }, 'queued request displaced');
      this.tell(displaced.waiter, this.whileStarting(this.displacedSpec));
    }
    this.queue.push(key, arrivedAt, priority, maxWaitMs < 0 ? this.service.queue.maxWaitMs : maxWaitMs);
    if (affinity >= 0) this.affinityOf.set(key, affinity);
    this.count(priority, 1);
    this.dispatch();
    return true;
  }

  /**
   * The service's tokens were reloaded (SIGHUP): their priorities keep their depth series from now
   * on, and a priority no token has any more loses its series once none waits at it.
   */
  tokensReloaded(tokens: readonly TokenConfig[]): void {
    const before = this.kept;
    this.kept = keptPriorities(tokens);
    for (const priority of before) if (!this.kept.has(priority) && this.atPriority.get(priority) === 0) this.reportDepth(priority);
  }

  cancel(thread: number, id: number): void {
    const entry = this.queue.remove(keyOf(thread, id));
    if (entry !== undefined) this.left(entry, 'cancelled');
  }

  /** Hands queued requests, in queue order, to ready replicas with room. */
  dispatch(): void {
    if (this.dispatching || this.queue.size === 0) return;
    this.dispatching = true;
    // Grants come in queue order, so by priority: each priority's depth is reported once.
    let priority = 0;
    let granted = 0;
    try {
      for (let entry = this.queue.first(); entry !== undefined; entry = this.queue.first()) {
        const thread = threadOf(entry.waiter);
        const view = this.views(thread);
        if (view === undefined) {
          // Its worker is gone (the queue is cleaned when that is noticed; this is the gap).
          this.queue.remove(entry.waiter);
          this.affinityOf.delete(entry.waiter);
          this.slots.addQueued(-1);
          this.count(entry.priority, -1);
          continue;
        }
        const hash = this.affinity === undefined ? undefined : this.affinityOf.get(entry.waiter);
        const slot =
          hash === undefined
            ? this.slots.take(thread, this.known, -1, this.fallback)
            : this.slots.takeNear(thread, this.known, this.affinity!.ring, hash, this.affinity!.maxLoad, this.fallback);
        if (slot < 0) break; // the first cannot be served: nobody can (every waiter takes the same slots)
        if (granted > 0 && entry.priority !== priority) this.reportDepth(priority);
        priority = entry.priority;
        granted++;
        this.queue.remove(entry.waiter);
        this.affinityOf.delete(entry.waiter);
        this.slots.addQueued(-1);
        this.atPriority.set(priority, this.atPriority.get(priority)! - 1);
        this.events?.queueWait(this.service.slug, sharedClock() - entry.enqueuedAt, 'granted');
        try {
          view.grant(idOf(entry.waiter), slot);
        } catch (err) {
          this.log.error({ service: this.service.slug, err }, 'grant failed');
        }
      }
    } finally {
      this.dispatching = false;
    }
    if (granted > 0) this.reportDepth(priority);
  }

  /** Fails every queued request with `error` (start failed, draining). */
  failAll(error: RelayError, outcome: QueueOutcome): void {
    if (this.queue.size === 0) return;
    const spec = errorSpec(error);
    const now = sharedClock();
    let n = 0;
    this.queue.clear((entry) => {
      n++;
      this.events?.queueWait(this.service.slug, now - entry.enqueuedAt, outcome);
      this.tell(entry.waiter, spec);
    });
    this.affinityOf.clear();
    this.slots.addQueued(-n);
    for (const priority of [...this.atPriority.keys()]) {
      this.atPriority.set(priority, 0);
      this.reportDepth(priority);
    }
  }

  /** A worker died: its queued requests are gone with it. */
  forgetThread(thread: number): void {
    const removed = this.queue.removeWhere((key) => threadOf(key) === thread);
    if (removed.length === 0) return;
    this.slots.addQueued(-removed.length);
    for (const entry of removed) {
      this.affinityOf.delete(entry.waiter);
      this.count(entry.priority, -1);
    }
  }

  private expired(key: number, waitedMs: number, entry: QueuedWaiter<number>): void {
    this.left(entry, 'expired');
    this.log.debug({ service: this.service.slug, waitedMs: Math.round(waitedMs), priority: entry.priority }, 'queued request expired');
    const budget = Math.round(entry.deadline - entry.enqueuedAt);
    this.tell(key, this.whileStarting(budget === this.service.queue.maxWaitMs ? this.waitExpired : this.expiredSpec(budget)));
  }

  /** A queued request left without a replica: counted out of the table and the metrics. */
  private left(entry: QueuedWaiter<number>, outcome: QueueOutcome): void {
    this.slots.addQueued(-1);
    this.affinityOf.delete(entry.waiter);
    this.events?.queueWait(this.service.slug, sharedClock() - entry.enqueuedAt, outcome);
    this.count(entry.priority, -1);
  }

  private count(priority: number, delta: number): void {
    this.atPriority.set(priority, (this.atPriority.get(priority) ?? 0) + delta);
    this.reportDepth(priority);
  }

  private reportDepth(priority: number): void {
    const n = this.atPriority.get(priority) ?? 0;
    const keep = this.kept.has(priority);
    if (n === 0 && !keep) this.atPriority.delete(priority);
    this.events?.queueDepth(this.service.slug, this.queue.size, priority, n, keep);
  }

  private expiredSpec(ms: number): ErrorSpec {
    return errorSpec(
      new RelayError('no_replica', {
        message: `No replica of the service could take the request within ${ms} ms.`,
        headers: { 'retry-after': String(WAIT_EXPIRED_RETRY_AFTER_S) },
      }),
    );
  }

  /** `spec`, with `Retry-After` the expected time left while the service is cold and starting. */
  private whileStarting(spec: ErrorSpec): ErrorSpec {
    const left = this.slots.startLeftMs();
    return left < 0 ? spec : { ...spec, headers: { ...spec.headers, 'retry-after': String(wholeSeconds(left)) } };
  }

  private tell(key: number, spec: ErrorSpec): void {
    try {
      this.views(threadOf(key))?.fail(idOf(key), spec);
    } catch (err) {
      this.log.error({ service: this.service.slug, err }, 'waiter failure not delivered');
    }
  }
}

/** The priorities whose depth series stay when empty: the tokens' and 0. */
function keptPriorities(tokens: readonly TokenConfig[]): ReadonlySet<number> {
  return new Set([0, ...tokens.map((t) => t.priority)]);
}
