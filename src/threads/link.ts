// The two directions between a service's control plane (main thread) and a data plane's view of
// it (each worker). Both are plain method calls: with `workers: 1` the view and the control plane
// live in one thread and call each other directly; with worker threads each call becomes one
// message (port-link.ts carries them, named by the method tables below). None of them is on the
// hot path: choosing a ready replica with room reads the shared slot table (slots.ts) instead.
import { type ErrorCode, RelayError } from '../http/errors.js';
import { linkMethods } from './port-link.js';
import type { FailureReason } from '../replicas/outcomes.js';

/** A replica as a data plane needs to know it: where it is and which slot counts for it. */
export interface ReplicaInfo {
  slot: number;
  gen: number;
  id: string;
  /** `http://127.0.0.1:9000` */
  origin: string;
  /** The `Host` header value. */
  host: string;
}

/** One of Sluice's errors, as it crosses threads. */
export interface ErrorSpec {
  code: ErrorCode;
  message: string;
  headers?: Record<string, string>;
}

export function errorSpec(error: RelayError): ErrorSpec {
  return error.headers === undefined
    ? { code: error.code, message: error.message }
    : { code: error.code, message: error.message, headers: error.headers };
}

export function errorFromSpec(spec: ErrorSpec): RelayError {
  return new RelayError(spec.code, spec.headers === undefined ? { message: spec.message } : { message: spec.message, headers: spec.headers });
}

/** Data plane → control plane, for one service: demand and what the data plane learned. */
export interface DemandLink {
  /**
   * Request `id` of thread `thread` waits for a replica (arrived at `arrivedAt`, `sharedClock`),
   * with its `priority`, its own wait (`maxWaitMs`, -1: the service's) and its affinity hash
   * (-1: none). The caller has already counted it in the slot table's `queued`.
   */
  enqueue(thread: number, id: number, arrivedAt: number, priority: number, maxWaitMs: number, affinity: number): void;
  /** A request that would not wait found the service cold: start a replica as a queued one would. */
  wake(): void;
  /** Request `id` left (its caller went away); if it is still queued it is dropped. */
  cancel(thread: number, id: number): void;
  /** A request finished while requests were queued: a slot may be free for the oldest waiter. */
  released(): void;
  /** A connection to the replica in `slot` (generation `gen`) was refused before any byte. */
  unreachable(slot: number, gen: number): void;
  /** The replica in `slot` has failed at least the ejection threshold of requests in a row, the last for `reason`. */
  failing(slot: number, gen: number, reason: FailureReason): void;
}

/** `DemandLink`'s methods, for carrying it between threads. */
export const DEMAND_LINK = linkMethods<DemandLink>({ enqueue: true, wake: true, cancel: true, released: true, unreachable: true, failing: true });

/** Control plane → one data plane's view of one service. */
export interface ViewLink {
  /** A replica exists (it may not be ready yet): open connections to it when it is. */
  announce(replica: ReplicaInfo): void;
  /** The replica is gone: close the connections to it. */
  gone(slot: number, gen: number): void;
  /** Queued request `id` gets the replica in `slot`, already counted for this thread. */
  grant(id: number, slot: number): void;
  /** Queued request `id` gets no replica. */
  fail(id: number, error: ErrorSpec): void;
}

/** `ViewLink`'s methods, for carrying it between threads. */
export const VIEW_LINK = linkMethods<ViewLink>({ announce: true, gone: true, grant: true, fail: true });
