// What a relayed request (relay.ts) is given of its service: the service as this thread sees it,
// rebuilt when tokens are reloaded.
import type { ServiceConfig } from '../config/types.js';
import type { LimitTable } from '../limits/limit-table.js';
import type { StreamCounters } from '../metrics/request-counters.js';
import type { ReplicaSet } from './replica-set.js';
import type { HeldBodies } from './body/held-bodies.js';

/**
 * What a relayed request needs to know about its service (rebuilt on token reload). A router's
 * request has its router here until the body names the model (model-router.ts), its service after.
 */
export interface ServiceRuntime {
  readonly config: Pick<ServiceConfig, 'slug' | 'maxRequestBytes' | 'queue'>;
  readonly replicas: ReplicaSet;
  /** This thread's counters of the service's streamed answers. */
  readonly streams: StreamCounters;
  /** This thread's account of the service's waiting and held request bodies. */
  readonly held: HeldBodies;
  /** The gateway's limit table, as this thread reads it (limits/limit-table.ts). */
  readonly limitTable: LimitTable;
}
