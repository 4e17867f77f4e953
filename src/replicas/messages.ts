// The messages between the main thread (control plane) and a worker thread (data plane). One
// MessagePort per worker carries all of them, so they arrive in the order they were posted (an
// announced replica is known before a grant on it). None is sent per request on the fast path.
import type { Config, TokenConfig } from '../config/types.js';
import type { ErrorSpec, ReplicaInfo } from './link.js';
import type { FailureReason } from './types.js';
import type { SlotTableInit } from './slots.js';

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
   *  control plane's answer: src/control/replicas/kind-policy.ts). */
  queuesForColdStart: boolean[];
  /** This thread's request counters (metrics/request-counters.ts). */
  store: SharedArrayBuffer;
  /** Gateway-wide flags (gateway.ts: [0] draining, [1] ready). */
  flags: SharedArrayBuffer;
  /** The gateway-wide authentication failure table (data/shared-auth-limiter.ts). */
  authFailures: SharedArrayBuffer;
  /** Test builds only: serve the route that makes a worker fail (GatewayOptions.testHooks). */
  testRoutes: boolean;
  /** The front end's build the main thread chose (http/uws-build.ts): every thread loads the same. */
  uwsBuild: string;
}

/** Main → worker. `s` is a service's index in the config. */
export type ToWorker =
  | { t: 'announce'; s: number; r: ReplicaInfo }
  | { t: 'gone'; s: number; slot: number; gen: number }
  | { t: 'grant'; s: number; id: number; slot: number }
  | { t: 'fail'; s: number; id: number; e: ErrorSpec }
  | { t: 'tokens'; services: { slug: string; tokens: TokenConfig[] }[] }
  | { t: 'drain'; timeoutMs: number }
  | { t: 'close' }
  | { t: 'metrics'; id: number; text: string; contentType: string; failed: boolean };

/** Worker → main. */
export type FromWorker =
  | { t: 'listening'; port: number }
  | { t: 'listen-failed'; reason: string }
  | { t: 'enq'; s: number; id: number; at: number; p: number; w: number; h: number }
  | { t: 'wake'; s: number }
  | { t: 'cancel'; s: number; id: number }
  | { t: 'released'; s: number }
  | { t: 'unreachable'; s: number; slot: number; gen: number }
  | { t: 'failing'; s: number; slot: number; gen: number; reason: FailureReason }
  | { t: 'log'; text: string }
  | { t: 'render'; id: number }
  | { t: 'drained' };

/** Index of the gateway-wide flags in `WorkerInit.flags`. */
export const FLAG_DRAINING = 0;
/** 1 once every data plane thread listens (and the admin listener, if any): `/readyz` says 200. */
export const FLAG_READY = 1;
export const FLAG_COUNT = 2;
