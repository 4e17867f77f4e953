// The bounded FIFO of requests waiting for a replica (contract section 6).
//
// - A doubly linked list gives FIFO order and O(1) removal; a Map from waiter to node finds the
//   node of a waiter whose caller went away (`remove`) in O(1).
// - Every waiter waits at most `maxWaitMs`. All waiters of a queue share that limit, so their
//   deadlines are in arrival order: ONE timer, armed for the head's deadline, serves the whole
//   queue. When it fires it expires every waiter whose deadline has passed and re-arms itself for
//   the new head. Removing the head does not touch the timer (it re-arms lazily when it fires);
//   emptying the queue clears it, so an empty queue holds no timer.
// - The timer is not `unref`ed: a waiting request is pending work that should keep the process up.
// - With worker threads, requests reach the queue by message, a little out of their arrival order
//   across workers: `push` takes the arrival time and inserts in order (walking back from the
//   tail, where a new arrival almost always belongs), so the request that has waited longest
//   anywhere is first.

/** A waiter in the queue, with the clock reading of its arrival (see `sharedClock`). */
export interface QueuedWaiter<W> {
  readonly waiter: W;
  readonly enqueuedAt: number;
}

interface Node<W> extends QueuedWaiter<W> {
  prev: Node<W> | undefined;
  next: Node<W> | undefined;
}

/** A clock every thread of the process reads alike (milliseconds, sub-millisecond precision). */
export function sharedClock(): number {
  return performance.timeOrigin + performance.now();
}

/** The longest delay setTimeout accepts (2^31 - 1 ms); longer deadlines re-arm when it fires. */
const MAX_TIMER_MS = 2_147_483_647;
/** libuv timers round to whole milliseconds: a timer may fire up to 1 ms before the deadline. */
const TIMER_SLACK_MS = 1;

export class WaiterQueue<W = unknown> {
  readonly maxRequests: number;
  readonly maxWaitMs: number;
  private readonly onExpire: (waiter: W, waitedMs: number) => void;
  private readonly clock: () => number;
  private readonly index = new Map<W, Node<W>>();
  private head: Node<W> | undefined = undefined;
  private tail: Node<W> | undefined = undefined;
  private timer: NodeJS.Timeout | undefined = undefined;
  private readonly fire = (): void => this.expire();

  /**
   * @param onExpire called for each waiter whose `maxWaitMs` ran out, after it left the queue
   *   (it may push or remove other waiters).
   */
  constructor(
    maxRequests: number,
    maxWaitMs: number,
    onExpire: (waiter: W, waitedMs: number) => void,
    clock: () => number = sharedClock,
  ) {
    this.maxRequests = maxRequests;
    this.maxWaitMs = maxWaitMs;
    this.onExpire = onExpire;
    this.clock = clock;
  }

  get size(): number {
    return this.index.size;
  }

  has(waiter: W): boolean {
    return this.index.has(waiter);
  }

  /**
   * Queues the waiter in arrival order (`arrivedAt`, default now); false (and nothing queued) when
   * the queue holds `maxRequests` already.
   */
  push(waiter: W, arrivedAt: number = this.clock()): boolean {
    if (this.index.size >= this.maxRequests) return false;
    if (this.index.has(waiter)) throw new Error('waiter is already queued');
    let after = this.tail;
    while (after !== undefined && after.enqueuedAt > arrivedAt) after = after.prev;
    const next = after === undefined ? this.head : after.next;
    const node: Node<W> = { waiter, enqueuedAt: arrivedAt, prev: after, next };
    if (after === undefined) this.head = node;
    else after.next = node;
    if (next === undefined) this.tail = node;
    else next.prev = node;
    this.index.set(waiter, node);
    // Only a new head needs a timer: a later waiter's deadline is never earlier than the head's.
    if (node.prev === undefined) this.arm(node.enqueuedAt + this.maxWaitMs);
    return true;
  }

  /** Removes every waiter for which `match` is true (their worker died); how many. */
  removeWhere(match: (waiter: W) => boolean): number {
    let removed = 0;
    for (const [waiter, node] of [...this.index]) {
      if (!match(waiter)) continue;
      this.unlink(node);
      removed++;
    }
    return removed;
  }

  /** The first waiter, removed from the queue; undefined when empty. */
  shift(): QueuedWaiter<W> | undefined {
    const node = this.head;
    if (node === undefined) return undefined;
    this.unlink(node);
    return node;
  }

  /** Removes a waiter wherever it is (its caller went away); its entry, or undefined if absent. */
  remove(waiter: W): QueuedWaiter<W> | undefined {
    const node = this.index.get(waiter);
    if (node === undefined) return undefined;
    this.unlink(node);
    return node;
  }

  /** Empties the queue, then calls `fn` for each waiter in arrival order. */
  clear(fn: (entry: QueuedWaiter<W>) => void): void {
    let node = this.head;
    this.head = undefined;
    this.tail = undefined;
    this.index.clear();
    this.disarm();
    while (node !== undefined) {
      const next = node.next;
      node.prev = undefined;
      node.next = undefined;
      fn(node);
      node = next;
    }
  }

  private unlink(node: Node<W>): void {
    if (node.prev === undefined) this.head = node.next;
    else node.prev.next = node.next;
    if (node.next === undefined) this.tail = node.prev;
    else node.next.prev = node.prev;
    node.prev = undefined;
    node.next = undefined;
    this.index.delete(node.waiter);
    if (this.head === undefined) this.disarm();
  }

  private arm(deadline: number): void {
    this.disarm();
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(deadline - this.clock())));
    this.timer = setTimeout(this.fire, delay);
  }

  private disarm(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** The head's timer fired: expire every waiter past its deadline, re-arm for the next one. */
  private expire(): void {
    this.timer = undefined;
    const now = this.clock();
    for (;;) {
      const node = this.head;
      if (node === undefined) return;
      const deadline = node.enqueuedAt + this.maxWaitMs;
      if (deadline > now + TIMER_SLACK_MS) {
        this.arm(deadline);
        return;
      }
      this.unlink(node);
      // A callback may push or remove waiters: the loop re-reads the head each time, and the
      // timer is re-armed for whatever head is left when the loop ends.
      this.onExpire(node.waiter, now - node.enqueuedAt);
    }
  }
}
