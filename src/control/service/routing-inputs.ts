// What a service's requests read to choose among its ready replicas, as the control plane keeps it:
// the replicas' load readings (`replicas.load`, load-reader.ts) and the affinity ring the queue's
// grants walk (`routing.affinityHeader`; each worker keeps its own from the same announcements).
// The choice itself is made where the request is, in the shared slot table (slots.ts).
//
// - Default: the fewest requests in flight among ready replicas under `concurrency`, equal ones in
//   turn (a per-thread rotating scan start), so equal replicas share light traffic.
// - `replicas.load`: the model servers' own queues first (the score), in flight next.
// - `routing.affinityHeader`: the session's replica on the hash ring, within the load bound.
// - `routing.prefix`: the replica sent the longest run of the prompt's leading blocks, within the
//   same bound (the index beside the slot table: replicas/prefix-index.ts); its expected hits are
//   reported here (`status`, `prefixHits`).
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import { AffinityRing } from '../../replicas/affinity-ring.js';
import type { SlotControl } from '../../replicas/slot-control.js';
import type { PrefixHits, ReplicaLoad, RoutingStatus } from '../../admin/status-source.js';
import type { PrefixCounts } from '../../replicas/prefix-index.js';
import type { GrantAffinity } from './demand.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import { LoadReader } from './load-reader.js';
import type { ManagedReplica } from './replica.js';

export class RoutingInputs {
  readonly routing: RoutingStatus;
  /** What the queue's grants need for affinity, if the service has it. */
  readonly affinity: GrantAffinity | undefined;
  private readonly loads: LoadReader | undefined;
  private readonly service: ServiceConfig;

  constructor(
    service: ServiceConfig,
    private readonly slots: SlotControl,
    private readonly replicas: () => Iterable<ManagedReplica>,
    log: Logger,
    events: ReplicaEvents | undefined,
  ) {
    this.service = service;
    const { load } = service.replicas;
    const { affinityHeader, affinityMaxLoad } = service.routing;
    this.routing = { policy: load === undefined ? 'fewest-in-flight' : 'queue-aware', affinityHeader: affinityHeader ?? null, prefix: null };
    this.affinity = affinityHeader === undefined ? undefined : { ring: new AffinityRing(), maxLoad: affinityMaxLoad };
    this.loads = load === undefined ? undefined : new LoadReader(service, load, slots, replicas, log, events);
  }

  /** The replica has an address: it takes its place on the ring. */
  placed(r: ManagedReplica): void {
    this.affinity?.ring.set(r.slot, r.origin);
  }

  /** The replica left rotation: its load reading goes (a return starts afresh). */
  leftRotation(r: ManagedReplica): void {
    this.loads?.left(r);
  }

  /** The replica is gone: its arcs of the ring go to the next replicas. */
  forgotten(r: ManagedReplica): void {
    this.affinity?.ring.delete(r.slot);
  }

  /** The routing as /status shows it now: with prefix-aware routing, the hits it expected, in all and per replica. */
  status(): RoutingStatus {
    const index = this.slots.prefix;
    const prefix = this.service.routing.prefix;
    if (index === undefined || prefix === undefined) return this.routing;
    const replicas = [];
    for (const r of this.replicas()) if (r.slot >= 0) replicas.push({ replica: r.id, ...hits(index.slotCounts(r.slot)) });
    return { ...this.routing, prefix: { ...prefix, ...hits(index.totals()), replicas } };
  }

  /** The service's counts and each replica's (metrics); empty without prefix-aware routing. */
  prefixHits(): { replica: string | null; hits: PrefixCounts }[] {
    const index = this.slots.prefix;
    if (index === undefined) return [];
    const rows: { replica: string | null; hits: PrefixCounts }[] = [{ replica: null, hits: index.totals() }];
    for (const r of this.replicas()) if (r.slot >= 0) rows.push({ replica: r.id, hits: index.slotCounts(r.slot) });
    return rows;
  }

  load(r: ManagedReplica): ReplicaLoad | undefined {
    return this.loads?.snapshot(r);
  }

  close(): void {
    this.loads?.close();
  }
}

function hits(c: PrefixCounts): PrefixHits {
  return { ...c, hitRate: c.blocks === 0 ? null : Math.round((c.matched / c.blocks) * 1000) / 1000 };
}
