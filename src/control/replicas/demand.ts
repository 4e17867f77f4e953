// The process-wide queue of one service (contract sections 6 and 10): requests from every worker
// that found no ready replica with room wait here, in arrival order, bounded by
// `queue.maxRequests` for the whole process and by `queue.maxWaitMs` each. When a slot frees up
// the oldest waiter anywhere gets it: the grant takes the slot in the shared table on the
// waiter's thread's behalf and tells that thread which replica it has.
import type { ServiceConfig } from '../../config-types.js';
import { RelayError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { type ErrorSpec, errorSpec, type ViewLink } from '../../replicas/link.js';
import { WaiterQueue, sharedClock } from '../../replicas/queue.js';
import type { SlotTable } from '../../replicas/slots.js';
import type { QueueOutcome, ReplicaEvents } from './events.js';

/** Retry-After (seconds) for `queue_full`: the queue moves as soon as replicas free up. */
const QUEUE_FULL_RETRY_AFTER_S = 1;
/** Retry-After (seconds) for `no_replica` after `queue.maxWaitMs`. */
const WAIT_EXPIRED_RETRY_AFTER_S = 5;

/** A queued request: its thread and its id there, in one number (the queue's key). */
const ID_SPAN = 2 ** 32;
const keyOf = (thread: number, id: number): number => thread * ID_SPAN + id;
const threadOf = (key: number): number => Math.floor(key / ID_SPAN);
const idOf = (key: number): number => key % ID_SPAN;

export class Demand {
  private readonly queue: WaiterQueue<number>;
  private readonly queueFull: ErrorSpec;
  private readonly waitExpired: ErrorSpec;
  private readonly known: Int32Array;
  private dispatching = false;

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
  ) {
    this.known = known;
    this.queue = new WaiterQueue<number>(service.queue.maxRequests, service.queue.maxWaitMs, (key, waitedMs) => this.expired(key, waitedMs));
    this.queueFull = errorSpec(
      new RelayError('queue_full', {
        message: `The service queue is full (${service.queue.maxRequests} requests); retry later.`,
        headers: { 'retry-after': String(QUEUE_FULL_RETRY_AFTER_S) },
      }),
    );
    this.waitExpired = errorSpec(
      new RelayError('no_replica', {
        message: `No replica of the service could take the request within ${service.queue.maxWaitMs} ms.`,
        headers: { 'retry-after': String(WAIT_EXPIRED_RETRY_AFTER_S) },
      }),
    );
  }

  get size(): number {
    return this.queue.size;
  }

  /** A request to queue; false when the queue was full (it has been told `queue_full`). */
  push(thread: number, id: number, arrivedAt: number): boolean {
    const key = keyOf(thread, id);
    if (!this.queue.push(key, arrivedAt)) {
      this.slots.addQueued(-1);
      this.views(thread)?.fail(id, this.queueFull);
      return false;
    }
    this.events?.queueDepth(this.service.slug, this.queue.size);
    this.dispatch();
    return true;
  }

  cancel(thread: number, id: number): void {
    const entry = this.queue.remove(keyOf(thread, id));
    if (entry === undefined) return;
    this.slots.addQueued(-1);
    if (this.events !== undefined) {
      this.events.queueWait(this.service.slug, sharedClock() - entry.enqueuedAt, 'cancelled');
      this.events.queueDepth(this.service.slug, this.queue.size);
    }
  }

  /** Hands queued requests, oldest first, to ready replicas with room. */
  dispatch(): void {
    if (this.dispatching || this.queue.size === 0) return;
    this.dispatching = true;
    let granted = 0;
    try {
      while (this.queue.size > 0) {
        const entry = this.queue.shift()!;
        const thread = threadOf(entry.waiter);
        const view = this.views(thread);
        if (view === undefined) {
          // Its worker is gone (the queue is cleaned when that is noticed; this is the gap).
          this.slots.addQueued(-1);
          continue;
        }
        const slot = this.slots.take(thread, this.known, -1, this.fallback);
        if (slot < 0) {
          this.queue.push(entry.waiter, entry.enqueuedAt); // back at the head: its arrival is the oldest
          break;
        }
        this.slots.addQueued(-1);
        granted++;
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
    if (granted > 0) this.events?.queueDepth(this.service.slug, this.queue.size);
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
    this.slots.addQueued(-n);
    this.events?.queueDepth(this.service.slug, this.queue.size);
  }

  /** A worker died: its queued requests are gone with it. */
  forgetThread(thread: number): void {
    const n = this.queue.removeWhere((key) => threadOf(key) === thread);
    if (n === 0) return;
    this.slots.addQueued(-n);
    this.events?.queueDepth(this.service.slug, this.queue.size);
  }

  private expired(key: number, waitedMs: number): void {
    this.slots.addQueued(-1);
    if (this.events !== undefined) {
      this.events.queueWait(this.service.slug, waitedMs, 'expired');
      this.events.queueDepth(this.service.slug, this.queue.size);
    }
    this.log.debug({ service: this.service.slug, waitedMs: Math.round(waitedMs) }, 'queued request expired');
    this.tell(key, this.waitExpired);
  }

  private tell(key: number, spec: ErrorSpec): void {
    try {
      this.views(threadOf(key))?.fail(idOf(key), spec);
    } catch (err) {
      this.log.error({ service: this.service.slug, err }, 'waiter failure not delivered');
    }
  }
}
