// A data plane thread: its own uWS app on the shared port, its own view of
// every service's replicas over the shared slot tables, its own upstream pools and request
// counters. Everything else (replicas, the queue, metrics text, signals) is the main thread's;
// the two talk through the messages in src/threads/messages.ts.
//
// A worker that fails (an uncaught error) closes its uWS app before it exits: a thread that ends
// with uWS sockets open aborts the whole process. The main thread logs the exit, gives back the
// replica slots this thread held and starts a replacement.
import { parentPort, workerData } from 'node:worker_threads';
import type { TemplatedApp } from 'uWebSockets.js';
import { createLogger } from '../log/logger.js';
import { PostingDestination } from '../log/transport.js';
import { CounterLayout, RequestCounters } from '../metrics/request-counters.js';
import { DEMAND_LINK, type DemandLink, VIEW_LINK } from '../threads/link.js';
import { SlotTable } from '../replicas/slots.js';
import { FLAG_DRAINING, FLAG_READY, type FromWorker, type ToWorker, type WorkerInit } from '../threads/messages.js';
import { linkOverPort, serveLink } from '../threads/port-link.js';
import { DataPlane } from './data-plane.js';
import { ReplicaView } from './replica-view.js';
import { loadUwsBuild } from '../http/uws-build.js';

const port = parentPort!;
const init = workerData as WorkerInit;
const { config, thread } = init;
const post = (message: FromWorker): void => port.postMessage(message);

const destination = new PostingDestination((text) => post({ t: 'log', text }));
const logger = createLogger(config.log.level, destination).child({ worker: thread });
const flags = new Int32Array(init.flags);
// The build the main thread chose, before the data plane builds its app.
await loadUwsBuild(init.uwsBuild);

/** One service's demand, as calls to the main thread. */
function demandLink(s: number): DemandLink {
  return linkOverPort(port, DEMAND_LINK, s);
}

const views = config.services.map((service, s) => new ReplicaView(service, new SlotTable(init.slots[s]!), thread, demandLink(s), init.queuesForColdStart[s]!, logger, init.poolCloseMs));

/** /metrics scrapes waiting for the main thread's rendering, by id. */
const pendingMetrics = new Map<number, { resolve: (value: { text: string; contentType: string }) => void; reject: (err: Error) => void }>();
let lastMetricsId = 0;

const plane = new DataPlane({
  config,
  logger,
  replicas: views,
  authFailures: init.authFailures,
  limits: init.limits,
  limitCells: init.limitCells,
  limitReload: init.limitReload,
  modelsCreated: init.modelsCreated,
  thread: init.thread,
  counter: new RequestCounters(new CounterLayout(config.services.map((service) => service.slug), init.storeRouters), init.store),
  ops:
    config.admin === undefined
      ? {
          get ready() {
            return Atomics.load(flags, FLAG_READY) === 1;
          },
          get draining() {
            return Atomics.load(flags, FLAG_DRAINING) === 1;
          },
          metrics: () =>
            new Promise((resolve, reject) => {
              const id = ++lastMetricsId;
              pendingMetrics.set(id, { resolve, reject });
              post({ t: 'render', id });
            }),
        }
      : undefined,
  testRoutes: init.testRoutes ? addTestRoutes : undefined,
});

/** Test builds only: `POST /__sluice_test/crash-worker` makes this worker fail as a bug would. */
function addTestRoutes(app: TemplatedApp): void {
  app.post('/__sluice_test/crash-worker', (res) => {
    res.cork(() => res.writeStatus('202 Accepted').end(String(thread)));
    setImmediate(() => {
      throw new Error('test hook: worker crash');
    });
  });
}

let exiting = false;
/** Closes uWS (required before a thread ends), sends the last log lines, and ends the thread. */
function exit(code: number): void {
  if (exiting) return;
  exiting = true;
  plane.close(code !== 0);
  void Promise.all([...views.map((view) => view.close()), plane.closeTracing()]).finally(() => {
    destination.flush();
    setImmediate(() => process.exit(code));
  });
}

process.on('uncaughtException', (err) => {
  logger.fatal({ err }, 'worker failed');
  exit(1);
});
process.on('unhandledRejection', (err) => {
  logger.fatal({ err }, 'worker failed');
  exit(1);
});

// The control plane's calls of each service's ViewLink; the rest below.
serveLink(port, VIEW_LINK, views, (err) => logger.error({ err }, 'link call refused'));
port.on('message', (message: ToWorker) => {
  switch (message.t) {
    case 'call': // served by serveLink
      break;
    case 'tokens': {
      const ignored = plane.reload(message.services, message.routers, message.reload, message.tracing);
      logger.info({ services: message.services.map((s) => s.slug).filter((slug) => !ignored.includes(slug)), ignored }, 'tokens reloaded');
      break;
    }
    case 'drain':
      logger.info({ inflight: plane.inflight }, 'worker draining');
      void plane.drain(message.timeoutMs).then(() => {
        logger.info({ inflight: plane.inflight }, 'worker drained');
        post({ t: 'drained' });
      });
      break;
    case 'close':
      exit(0);
      break;
    case 'metrics': {
      const pending = pendingMetrics.get(message.id);
      pendingMetrics.delete(message.id);
      if (message.failed) pending?.reject(new Error('the main thread could not render the metrics'));
      else pending?.resolve({ text: message.text, contentType: message.contentType });
      break;
    }
  }
});

plane.listen(config.listen.host, init.port, false).then(
  (chosen) => {
    // Sent before `listening`, so the main thread writes it before `gateway listening`.
    logger.info({ port: chosen }, 'worker listening');
    destination.flush();
    post({ t: 'listening', port: chosen });
  },
  (err: unknown) => {
    post({ t: 'listen-failed', reason: err instanceof Error ? err.message : String(err) });
    exit(1);
  },
);
