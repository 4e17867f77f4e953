// The bounded queue of requests waiting for a replica: highest priority first, and among equal
// priorities the one that arrived first (with one priority it is exactly FIFO).
//
// - Order: one FIFO list per priority present (a doubly linked list, O(1) removal), the lists in a
//   sorted array by priority, highest first (a request of a new priority inserts its list by binary
//   search; a priority whose list empties leaves). The head is the first of the highest list; the
//   last in queue order — the most recent arrival among the lowest priority, the one a higher
//   arrival displaces from a full queue — is the last of the lowest list.
// - Deadlines: each waiter has its own (its arrival plus the service's `maxWaitMs`, or a lower
//   per-request wait), so deadlines are no longer in queue order. A binary min-heap of the waiters
//   by deadline (each knows its index there: removal anywhere is O(log n)), and ONE timer, armed for
//   the earliest deadline, serve the whole queue. When it fires it expires every waiter past its
//   deadline and re-arms for the next. A new waiter re-arms the timer only when its deadline is
//   earlier than the one armed; a removal never touches the timer (a timer that finds nothing
//   expired re-arms lazily), and emptying the queue clears it, so an empty queue holds no timer.
//   No waiter has a timer of its own.
// - The timer is not `unref`ed: a waiting request is pending work that should keep the process up.
// - With worker threads, requests reach the queue by message, a little out of their arrival order
//   across workers: `push` takes the arrival time and inserts in order (walking back from the
//   tail of its priority's list, where a new arrival almost always belongs).
// - A Map from waiter to node finds the node of a waiter whose caller went away (`remove`).
//
// Costs, n waiters and p distinct priorities: push O(log n + log p), plus O(p) to insert a new
// priority's list; remove and shift O(log n) (+ O(p) when a list empties); expiry O(log n) each.
import { sharedClock } from '../../replicas/clock.js';

/** A waiter in the queue, with its arrival (see `sharedClock`), priority and deadline. */
export interface QueuedWaiter<W> {
  readonly waiter: W;
  readonly enqueuedAt: number;
  readonly priority: number;
  /** `sharedClock` time after which it gets no replica. */
  readonly deadline: number;
}

interface Node<W> extends QueuedWaiter<W> {
  list: PriorityList<W>;
  prev: Node<W> | undefined;
  next: Node<W> | undefined;
  /** Index in the deadline heap. */
  heapAt: number;
}

/** The waiters of one priority, in arrival order. */
interface PriorityList<W> {
  readonly priority: number;
  head: Node<W> | undefined;
  tail: Node<W> | undefined;
}

/** The longest delay setTimeout accepts (2^31 - 1 ms); longer deadlines re-arm when it fires. */
const MAX_TIMER_MS = 2_147_483_647;
/** libuv timers round to whole milliseconds: a timer may fire up to 1 ms before the deadline. */
const TIMER_SLACK_MS = 1;

export class WaiterQueue<W = unknown> {
  readonly maxRequests: number;
  readonly maxWaitMs: number;
  private readonly onExpire: (waiter: W, waitedMs: number, entry: QueuedWaiter<W>) => void;
  private readonly clock: () => number;
  private readonly index = new Map<W, Node<W>>();
  /** Lists by priority, highest first; and by priority, to find one. */
  private readonly lists: PriorityList<W>[] = [];
  private readonly byPriority = new Map<number, PriorityList<W>>();
  /** Min-heap of the waiters by deadline. */
  private readonly heap: Node<W>[] = [];
  private timer: NodeJS.Timeout | undefined = undefined;
  /** The deadline the timer was armed for (Infinity: none). */
  private armedFor = Infinity;
  private readonly fire = (): void => this.expire();

  /**
   * @param maxWaitMs the longest any waiter waits (a per-waiter wait may only be lower).
   * @param onExpire called for each waiter whose deadline passed, after it left the queue (it may
   *   push or remove other waiters).
   */
  constructor(
    maxRequests: number,
    maxWaitMs: number,
    onExpire: (waiter: W, waitedMs: number, entry: QueuedWaiter<W>) => void,
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

  get full(): boolean {
    return this.index.size >= this.maxRequests;
  }

  has(waiter: W): boolean {
    return this.index.has(waiter);
  }

  /**
   * Queues the waiter by priority, then arrival (`arrivedAt`, default now), to wait at most
   * `waitMs` (never more than `maxWaitMs`); false (and nothing queued) when the queue is full.
   */
  push(waiter: W, arrivedAt: number = this.clock(), priority = 0, waitMs: number = this.maxWaitMs): boolean {
    if (this.index.size >= this.maxRequests) return false;
    if (this.index.has(waiter)) throw new Error('waiter is already queued');
    const list = this.listOf(priority);
    let after = list.tail;
    while (after !== undefined && after.enqueuedAt > arrivedAt) after = after.prev;
    const next = after === undefined ? list.head : after.next;
    const deadline = arrivedAt + Math.min(Math.max(0, waitMs), this.maxWaitMs);
    const node: Node<W> = { waiter, enqueuedAt: arrivedAt, priority, deadline, list, prev: after, next, heapAt: this.heap.length };
    if (after === undefined) list.head = node;
    else after.next = node;
    if (next === undefined) list.tail = node;
    else next.prev = node;
    this.index.set(waiter, node);
    this.heap.push(node);
    this.siftUp(node.heapAt);
    if (deadline < this.armedFor) this.arm(deadline);
    return true;
  }

  /** The waiter that goes next, left in the queue; undefined when empty. */
  first(): QueuedWaiter<W> | undefined {
    return this.lists[0]?.head;
  }

  /** The waiter that would go last: the most recent arrival among the lowest priority. */
  last(): QueuedWaiter<W> | undefined {
    return this.lists[this.lists.length - 1]?.tail;
  }

  /**
   * Makes room for an arrival of `priority` in a full queue: removes and returns the last waiter
   * if its priority is lower; undefined (and nothing removed) otherwise.
   */
  displaceFor(priority: number): QueuedWaiter<W> | undefined {
    const last = this.lists[this.lists.length - 1]?.tail;
    if (last === undefined || last.priority >= priority) return undefined;
    this.unlink(last);
    return last;
  }

  /** The first waiter, removed from the queue; undefined when empty. */
  shift(): QueuedWaiter<W> | undefined {
    const node = this.lists[0]?.head;
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

  /** Removes every waiter for which `match` is true (their worker died); their entries. */
  removeWhere(match: (waiter: W) => boolean): QueuedWaiter<W>[] {
    const removed: QueuedWaiter<W>[] = [];
    for (const [waiter, node] of [...this.index]) {
      if (!match(waiter)) continue;
      this.unlink(node);
      removed.push(node);
    }
    return removed;
  }

  /** Empties the queue, then calls `fn` for each waiter in queue order. */
  clear(fn: (entry: QueuedWaiter<W>) => void): void {
    const lists = this.lists.splice(0);
    this.byPriority.clear();
    this.index.clear();
    this.heap.length = 0;
    this.disarm();
    for (const list of lists) {
      let node = list.head;
      while (node !== undefined) {
        const next = node.next;
        node.prev = undefined;
        node.next = undefined;
        fn(node);
        node = next;
      }
    }
  }

  // ── priority lists ─────────────────────────────────────────────────────────────────────────

  private listOf(priority: number): PriorityList<W> {
    let list = this.byPriority.get(priority);
    if (list !== undefined) return list;
    list = { priority, head: undefined, tail: undefined };
    this.byPriority.set(priority, list);
    this.lists.splice(this.listIndex(priority), 0, list);
    return list;
  }

  /** Where the list of `priority` is, or would go, in `lists` (highest priority first). */
  private listIndex(priority: number): number {
    let lo = 0;
    let hi = this.lists.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.lists[mid]!.priority > priority) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private unlink(node: Node<W>): void {
    const list = node.list;
    if (node.prev === undefined) list.head = node.next;
    else node.prev.next = node.next;
    if (node.next === undefined) list.tail = node.prev;
    else node.next.prev = node.prev;
    node.prev = undefined;
    node.next = undefined;
    if (list.head === undefined) {
      this.byPriority.delete(list.priority);
      this.lists.splice(this.listIndex(list.priority), 1);
    }
    this.index.delete(node.waiter);
    this.heapRemove(node.heapAt);
    if (this.index.size === 0) this.disarm();
  }

  // ── the deadline heap ──────────────────────────────────────────────────────────────────────

  private heapRemove(at: number): void {
    const heap = this.heap;
    const last = heap.pop()!;
    if (at === heap.length) return;
    heap[at] = last;
    last.heapAt = at;
    this.siftDown(this.siftUp(at));
  }

  /** Moves the node at `at` up to its place; returns where it ended. */
  private siftUp(at: number): number {
    const heap = this.heap;
    const node = heap[at]!;
    while (at > 0) {
      const up = (at - 1) >> 1;
      const parent = heap[up]!;
      if (parent.deadline <= node.deadline) break;
      heap[at] = parent;
      parent.heapAt = at;
      at = up;
    }
    heap[at] = node;
    node.heapAt = at;
    return at;
  }

  private siftDown(at: number): void {
    const heap = this.heap;
    const node = heap[at]!;
    const n = heap.length;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= n) break;
      if (child + 1 < n && heap[child + 1]!.deadline < heap[child]!.deadline) child++;
      const c = heap[child]!;
      if (c.deadline >= node.deadline) break;
      heap[at] = c;
      c.heapAt = at;
      at = child;
    }
    heap[at] = node;
    node.heapAt = at;
  }

  // ── the one timer ──────────────────────────────────────────────────────────────────────────

  private arm(deadline: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(deadline - this.clock())));
    this.timer = setTimeout(this.fire, delay);
    this.armedFor = delay === MAX_TIMER_MS ? this.clock() + MAX_TIMER_MS : deadline;
  }

  private disarm(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.armedFor = Infinity;
  }

  /** The timer fired: expire every waiter past its deadline, re-arm for the next one. */
  private expire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = this.clock();
    for (;;) {
      const node = this.heap[0];
      if (node === undefined) return;
      if (node.deadline > now + TIMER_SLACK_MS) {
        this.arm(node.deadline);
        return;
      }
      this.unlink(node);
      // A callback may push or remove waiters: the loop re-reads the earliest each time, and the
      // timer is re-armed for whatever is earliest when the loop ends.
      this.onExpire(node.waiter, now - node.enqueuedAt, node);
    }
  }
}
