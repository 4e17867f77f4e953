// One watch request of the EndpointSlice watch (endpoint-watch.ts). Its events and bookmarks go to
// the watch as they come; it ends once, saying what its end asks of the next request. This class
// is the one writer of the request's state (answered, working, its timers, its end).
//
// - An ERROR event ends it at once, the request aborted: the API server ends the stream after one,
//   but a proxy or a fake API server may keep it open, and waiting for that end would wait for
//   good. `410` (the event or the status) is `gone`: list again. Any other ERROR event, or a status
//   other than 200, is `failed`: the API server said the watch failed, even inside a 200.
// - It is working once an event or bookmark came, or once the API server answered (the 200) and it
//   has been open `WATCH_HELD_MS`: the call succeeded (`working()`: the backoff starts again from
//   its base, a recovery after failures is logged).
// - A clean end or a break (a reset: a load balancer cutting long connections, an API server
//   restart) is `resume`, at once, when it was working or had been open `WATCH_HELD_MS`, answered
//   or not: a Node.js server sends a watch's status line with its first line unless it flushes it,
//   so a silent watch there has no answer at all, and its cut says no more about the API server
//   than the cut of an answered one. Sooner, it is `failed`: a server or proxy that accepts watches
//   and cuts them at once is retried with the backoff, not in a loop.
// - No line for `stallMs`: `resume` if it was working; with no answer at all in that time it is
//   `failed` (a black-holed API server).
import type { KubeConfig } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import { statusOf } from './api-trouble.js';
import { WATCH_HELD_MS } from '../../../tunables.js';

/** How a watch request ended, and so what comes next. */
export type WatchEnd =
  /** 410 Gone: the history from its resourceVersion is compacted; list again, at once. */
  | { kind: 'gone' }
  /** It ran, then ended (`err` undefined) or broke: the next one starts at once. */
  | { kind: 'resume'; err: unknown }
  /** The API server said it failed, or it ended before it ran: a failure in a row. */
  | { kind: 'failed'; err: unknown }
  /** `stop()` was called. */
  | { kind: 'stopped' };

interface WatchTarget {
  path: string;
  query: Record<string, string | number | boolean>;
  /** No line (event or bookmark) for this long: the request is given up. */
  stallMs: number;
}

interface WatchSink {
  /** An event or a bookmark (never an ERROR event). */
  line(type: string, object: unknown): void;
  /** The watch is working (at most once per request). */
  working(): void;
  /** No line came for `stallMs`. */
  stalled(): void;
}

/** `kind: Status` in an ERROR event. */
interface WatchStatus {
  code?: number;
  reason?: string;
  message?: string;
}

export class WatchRequest {
  /** How it ended; settles once. */
  readonly ended: Promise<WatchEnd>;
  /** Resolves `ended`; undefined once it has. */
  private settle: ((end: WatchEnd) => void) | undefined;
  private readonly sentAt = Date.now();
  /** The API server answered 200 (a Node.js server may send it only with the first line). */
  private answered = false;
  private sawLine = false;
  private isWorking = false;
  /** Aborts the HTTP request; the client hands it out only once the status line is in. */
  private request: AbortController | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private readonly heldTimer: NodeJS.Timeout;

  constructor(
    kubeConfig: KubeConfig,
    private readonly target: WatchTarget,
    private readonly sink: WatchSink,
  ) {
    this.ended = new Promise((resolve) => (this.settle = resolve));
    this.heldTimer = setTimeout(() => this.check(), WATCH_HELD_MS);
    this.heldTimer.unref();
    this.armStall();
    new Watch(kubeConfig)
      .watch(
        target.path,
        target.query,
        (type: string, object: unknown) => this.onLine(type, object),
        (err: unknown) => this.onDone(err),
      )
      .then(
        // `watch()` resolves once the response is in; when it is not a 200 (or none came) it has
        // called `done` with the error first.
        (request: AbortController) => this.onAnswered(request),
        (err: unknown) => this.end({ kind: 'failed', err }),
      );
  }

  stop(): void {
    this.end({ kind: 'stopped' });
  }

  private get open(): boolean {
    return this.settle !== undefined;
  }

  private get lasted(): boolean {
    return Date.now() - this.sentAt >= WATCH_HELD_MS;
  }

  /** Marks it working once it is; by the clock too, as a busy event loop may not have run the timer. */
  private check(): void {
    if (this.isWorking || !this.open || !(this.sawLine || (this.answered && this.lasted))) return;
    this.isWorking = true;
    this.sink.working();
  }

  private onAnswered(request: AbortController): void {
    this.request = request;
    if (!this.open) {
      request.abort();
      return;
    }
    this.answered = true;
    this.check();
  }

  private onLine(type: string, object: unknown): void {
    if (!this.open) return;
    if (type === 'ERROR') {
      const s = object as WatchStatus;
      if (s.code === 410) this.end({ kind: 'gone' });
      else this.end({ kind: 'failed', err: Object.assign(new Error(s.message ?? 'watch error'), { statusCode: s.code, body: s }) });
      return;
    }
    this.sawLine = true;
    this.check();
    this.armStall();
    this.sink.line(type, object);
  }

  /** The stream ended (`err` null) or broke, or the answer was not a 200. */
  private onDone(err: unknown): void {
    if (!this.open) return;
    const status = statusOf(err);
    if (status === 410) {
      this.end({ kind: 'gone' });
      return;
    }
    if (status !== undefined) {
      this.end({ kind: 'failed', err });
      return;
    }
    this.check();
    const cause = err ?? undefined;
    if (this.isWorking || this.lasted) this.end({ kind: 'resume', err: cause });
    else this.end({ kind: 'failed', err: cause ?? Object.assign(new Error('watch ended before it was working'), { code: 'WATCH_ENDED' }) });
  }

  private armStall(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = setTimeout(() => this.onStall(), this.target.stallMs);
    this.stallTimer.unref();
  }

  private onStall(): void {
    if (!this.open) return;
    this.sink.stalled();
    this.check();
    const err = Object.assign(new Error('watch stalled'), { code: 'WATCH_STALLED' });
    this.end(this.isWorking ? { kind: 'resume', err } : { kind: 'failed', err });
  }

  private end(end: WatchEnd): void {
    const settle = this.settle;
    if (settle === undefined) return;
    this.settle = undefined;
    clearTimeout(this.stallTimer);
    clearTimeout(this.heldTimer);
    this.request?.abort();
    settle(end);
  }
}
