// The data plane threads, supervised by the main thread: start, carry messages, replace a worker
// that dies (logged and replaced; requests on other workers are untouched).
// A dead worker's in-flight requests are lost with it (their callers see a closed connection);
// the replica slots it held and the requests it had queued are given back at once.
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log/logger.js';
import { destinationOf } from '../log/transport.js';
import type { RequestCounters } from '../metrics/request-counters.js';
import { DEMAND_LINK, VIEW_LINK, type ViewLink } from '../threads/link.js';
import type { FromWorker, ToWorker, WorkerInit } from '../threads/messages.js';
import { linkOverPort, serveLink } from '../threads/port-link.js';
import type { ViewRouter } from '../control/service/control-types.js';
import type { ServiceControl } from '../control/service/service-control.js';
import { backoffMs } from '../time/backoff.js';
import { settlesWithin } from '../time/bounded-wait.js';

/** A replacement waits this long, doubling per quick death up to 5 s (a crash loop backs off). */
const WORKER_RESPAWN_BASE_MS = 100;

/** The longest wait before replacing a worker that keeps dying. */
const WORKER_RESPAWN_MAX_MS = 5_000;

/** How long closing waits for a worker thread to exit. */
const WORKER_CLOSE_WAIT_MS = 5_000;

/** A worker alive this long resets its quick-death count. */
const WORKER_STABLE_MS = 10_000;

const WORKER_URL = new URL('../data/worker.js', import.meta.url);

export interface WorkerPoolOptions {
  logger: Logger;
  services: readonly ServiceControl[];
  /** `workerData` for thread `thread` (its slot rows, its request store, the port). */
  init(thread: number, port: number): WorkerInit;
  /** Renders `/metrics` for a worker serving it on the relay listener. */
  render(): Promise<{ text: string; contentType: string }>;
  /** Thread `thread`'s request counters (their in-flight gauge is reset when it dies). */
  countersOf(thread: number): RequestCounters;
  /** Thread `thread` died: what its requests held of the limits per caller is given back; returns the places. */
  limitsGone(thread: number): number;
}

/** One worker thread and the per-service links the control plane uses to reach it. */
class WorkerHandle {
  readonly views: ViewLink[];
  listening: ((port: number) => void) | undefined;
  failed: ((reason: string) => void) | undefined;
  drained: (() => void) | undefined;
  exited: Promise<number>;
  startedAt = performance.now();
  alive = true;
  listened = false;
  /** The error the thread ended with, if any (for the reason of a failed start). */
  error: Error | undefined = undefined;
  /** Started in place of a dead worker: if it fails, the pool tries again (a first start's caller decides). */
  replacement = false;

  constructor(
    readonly thread: number,
    readonly worker: Worker,
    services: number,
  ) {
    this.views = Array.from({ length: services }, (_, s) => linkOverPort(worker, VIEW_LINK, s));
    this.exited = new Promise((resolve) => worker.once('exit', resolve));
  }

  post(message: ToWorker): void {
    if (this.alive) this.worker.postMessage(message);
  }
}

export class WorkerPool {
  private readonly handles: (WorkerHandle | undefined)[] = [];
  private readonly quickDeaths: number[] = [];
  private closing = false;
  port = 0;

  constructor(private readonly options: WorkerPoolOptions) {}

  /** The router a service's control plane reaches the data planes through. */
  router(s: number): ViewRouter {
    return {
      get: (thread) => {
        const h = this.handles[thread];
        return h?.alive === true ? h.views[s] : undefined;
      },
      all: () => this.handles.filter((h): h is WorkerHandle => h?.alive === true).map((h) => h.views[s]!),
    };
  }

  get size(): number {
    return this.handles.filter((h) => h?.alive === true).length;
  }

  /** Starts worker `thread` and resolves with its port once it listens. */
  start(thread: number, port: number, replacement = false): Promise<number> {
    const worker = new Worker(WORKER_URL, { workerData: this.options.init(thread, port) });
    const h = new WorkerHandle(thread, worker, this.options.services.length);
    h.replacement = replacement;
    this.handles[thread] = h;
    const listening = new Promise<number>((resolve, reject) => {
      h.listening = resolve;
      h.failed = (reason) => reject(new Error(reason));
    });
    // The services' demand arrives as calls of their DemandLink; the rest in onMessage.
    serveLink(worker, DEMAND_LINK, this.options.services, (err) => this.options.logger.error({ worker: thread, err }, 'link call refused'));
    worker.on('message', (message: FromWorker) => this.onMessage(h, message));
    worker.on('error', (err) => {
      h.error = err;
      this.options.logger.error({ worker: thread, err }, 'worker error');
    });
    worker.once('exit', (code) => this.onExit(h, code));
    // The replicas that exist already; later changes reach it like every other worker.
    this.options.services.forEach((service, s) => {
      for (const info of service.replicas()) h.views[s]!.announce(info);
    });
    return listening;
  }

  private onMessage(h: WorkerHandle, m: FromWorker): void {
    switch (m.t) {
      case 'call': // served by serveLink (start)
        break;
      case 'log':
        destinationOf(this.options.logger).write(m.text);
        break;
      case 'render':
        this.options.render().then(
          ({ text, contentType }) => h.post({ t: 'metrics', id: m.id, text, contentType, failed: false }),
          (err: unknown) => {
            this.options.logger.error({ err }, 'metrics failed');
            // The worker answers 500, as the main thread does when it serves /metrics itself.
            h.post({ t: 'metrics', id: m.id, text: '', contentType: 'text/plain', failed: true });
          },
        );
        break;
      case 'listening':
        h.listened = true;
        h.listening?.(m.port);
        break;
      case 'listen-failed':
        h.failed?.(m.reason);
        break;
      case 'drained':
        h.drained?.();
        break;
    }
  }

  private onExit(h: WorkerHandle, code: number): void {
    h.alive = false;
    h.failed?.(`worker ${h.thread} exited with code ${code} before listening${h.error === undefined ? '' : `: ${h.error.message}`}`);
    h.drained?.();
    if (this.handles[h.thread] !== h) return;
    if (!h.listened && !h.replacement && !this.closing) {
      this.handles[h.thread] = undefined; // a first start that failed: its caller reports it
      return;
    }
    let given = 0;
    for (const service of this.options.services) given += service.threadGone(h.thread);
    this.options.countersOf(h.thread).forgetInflight();
    const limitPlaces = this.options.limitsGone(h.thread);
    if (this.closing) return;
    const now = performance.now();
    if (now - h.startedAt >= WORKER_STABLE_MS) this.quickDeaths[h.thread] = 0;
    const deaths = (this.quickDeaths[h.thread] = (this.quickDeaths[h.thread] ?? 0) + 1);
    const delay = backoffMs(WORKER_RESPAWN_BASE_MS, WORKER_RESPAWN_MAX_MS, deaths);
    this.options.logger.error({ worker: h.thread, code, slotsGivenBack: given, limitPlacesGivenBack: limitPlaces, restartInMs: delay }, 'worker died; replacing it');
    setTimeout(() => {
      if (this.closing) return;
      this.start(h.thread, this.port, true).then(
        () => this.options.logger.info({ worker: h.thread, port: this.port }, 'worker replaced'),
        // It has exited too: its exit schedules the next attempt.
        (err: unknown) => this.options.logger.error({ worker: h.thread, err }, 'replacement worker failed to listen'),
      );
    }, delay).unref();
  }

  /** Posts a message to every live worker. */
  broadcast(message: ToWorker): void {
    for (const h of this.handles) h?.post(message);
  }

  /** Every worker stops accepting and finishes what it serves (each bounded by `timeoutMs`). */
  async drain(timeoutMs: number): Promise<void> {
    await Promise.all(
      this.handles.map((h) => {
        if (h === undefined || !h.alive) return undefined;
        const drained = new Promise<void>((resolve) => (h.drained = resolve));
        h.post({ t: 'drain', timeoutMs });
        return drained;
      }),
    );
  }

  /** Closes every worker (its connections end) and waits for the threads to exit. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.handles.map(async (h) => {
        if (h === undefined) return;
        h.post({ t: 'close' });
        const exited = await settlesWithin(h.exited, WORKER_CLOSE_WAIT_MS);
        if (!exited) this.options.logger.error({ worker: h.thread, waitedMs: WORKER_CLOSE_WAIT_MS }, 'worker did not exit');
      }),
    );
  }
}
