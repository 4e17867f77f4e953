// The messages between the main thread (control plane) and a worker thread (data plane). One
// MessagePort per worker carries all of them, so they arrive in the order they were posted (an
// announced replica is known before a grant on it). None is sent per request on the fast path.
// The calls of link.ts's two interfaces travel on the same port as `LinkCall`s (port-link.ts).
import type { Config, LimitsConfig, RouterConfig, TokenConfig } from '../config/types.js';
import type { LinkCall } from './port-link.js';
import type { SlotTableInit } from '../replicas/slot-memory.js';
import type { TracingSettings } from '../config/tracing-config.js';

/** `workerData` of a data plane thread. */
export interface WorkerInit {
  config: Config;
  /** This thread's row in every slot table, and its index in logs (`worker`). */
  thread: number;
  /** The port to listen on (0: pick one; the first worker only). */
  port: number;
  /** Per service, in config order: its shared slot table (its capacity is the kind's). */
  slots: SlotTableInit[];
  /** Per service, in config order: its kind queues a request while no replica is ready (the
   *  control plane's answer: src/control/service/kind-policy.ts). */
  queuesForColdStart: boolean[];
  /** This thread's request counters (metrics/request-counters.ts). */
  store: SharedArrayBuffer;
  /** Their blocks for routers' token usage, fixed at start (the layout's `routers`). */
  storeRouters: number;
  /** Gateway-wide flags (gateway.ts: [0] draining, [1] ready). */
  flags: SharedArrayBuffer;
  /** The gateway-wide authentication failure table (data/shared-auth-limiter.ts). */
  authFailures: SharedArrayBuffer;
  /** The gateway-wide limit table (limits/limit-table.ts). */
  limits: SharedArrayBuffer;
  /** Per service, then per router, in config order: each token's cell set in `limits`, or -1 (limits/limit-cells.ts). */
  limitCells: number[][];
  /** The reload of the tokens those cell sets are of (limits/limit-cells.ts: `reload`). */
  limitReload: number;
  /** Each model's `created` (gateway/model-births.ts). */
  modelsCreated: Record<string, number>;
  /** Test builds only: serve the route that makes a worker fail (GatewayOptions.testHooks). */
  testRoutes: boolean;
  /** The front end's build the main thread chose (http/uws-build.ts): every thread loads the same. */
  uwsBuild: string;
  /** How long closing a gone replica's pool waits for its requests (the control plane's `poolCloseMs`). */
  poolCloseMs: number;
}

/** A service's reloaded tokens: the tokens, the service's limits, each token's cell set or -1. */
export interface TokensReload {
  slug: string;
  tokens: TokenConfig[];
  limits: LimitsConfig | undefined;
  cells: number[];
}

/** The routers of a reloaded config (SIGHUP): each router, each service's models, the routers' tokens' cell sets. */
export interface RoutersReload {
  routers: RouterConfig[];
  models: { slug: string; models: string[] | undefined }[];
  /** Per router, in order: each token's cell set in `limits`, or -1. */
  cells: number[][];
  /** Each model's `created`: when the config first named it (gateway/model-births.ts), unix seconds. */
  created: Record<string, number>;
}

/** Main → worker. A `LinkCall` is a call of a service's `ViewLink` (`s`: its index in the config). */
export type ToWorker =
  | LinkCall
  | { t: 'tokens'; services: TokensReload[]; routers?: RoutersReload; reload: number; tracing: TracingSettings | undefined }
  | { t: 'drain'; timeoutMs: number }
  | { t: 'close' }
  | { t: 'metrics'; id: number; text: string; contentType: string; failed: boolean };

/** Worker → main. A `LinkCall` is a call of a service's `DemandLink` (`s`: its index in the config). */
export type FromWorker =
  | LinkCall
  | { t: 'listening'; port: number }
  | { t: 'listen-failed'; reason: string }
  | { t: 'log'; text: string }
  | { t: 'render'; id: number }
  | { t: 'drained' };

/** Index of the gateway-wide flags in `WorkerInit.flags`. */
export const FLAG_DRAINING = 0;
/** 1 once every data plane thread listens (and the admin listener, if any): `/readyz` says 200. */
export const FLAG_READY = 1;
export const FLAG_COUNT = 2;
