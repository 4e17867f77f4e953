// A launched service's place in its pool (`replicas.pool`; the pool itself:
// src/control/pools/unit-pool.ts): which of its replicas hold which units, what it wants of the
// pool, and which of its replicas may be stopped for another service. The pool decides; this
// class answers for the service and acts through its host (the state machine stays the one
// writer of states and slots).
import { MIN_PRIORITY } from '../../../config/rules.js';
import { sharedClock } from '../../../replicas/clock.js';
import type { IdleHolder, PoolMember, StartRank, UnitPool } from '../../pools/unit-pool.js';
import type { ReplicaHost } from '../../service/kind-policy.js';
import type { ManagedReplica } from '../../service/replica.js';

/** What the launched policy (launches.ts) does for the seats. */
export interface Launcher {
  /** Why a replica should start now (`queued requests`, `min`), or undefined: none should. */
  wanted(): string | undefined;
  /** Starts one replica holding `units`; undefined when no slot is free (it asks again soon). */
  start(why: string, units: readonly number[]): ManagedReplica | undefined;
}

/** A start that only `min` wants ranks after every start that requests wait for. */
const MIN_RANK: StartRank = { priority: MIN_PRIORITY - 1, arrivedAt: 0 };

export class PoolSeats implements PoolMember {
  readonly service: string;
  readonly units: number;
  /** The units of each replica that holds some: from before its spawn until its process has exited. */
  private readonly held = new Map<ManagedReplica, readonly number[]>();

  constructor(
    private readonly host: ReplicaHost,
    readonly pool: UnitPool,
    private readonly launcher: Launcher,
  ) {
    this.service = host.service.slug;
    this.units = host.service.replicas.units;
  }

  wants(): StartRank | undefined {
    const why = this.launcher.wanted();
    if (why === undefined) return undefined;
    if (why === 'min') return MIN_RANK;
    return this.host.firstWaiting() ?? { priority: 0, arrivedAt: sharedClock() };
  }

  idleHolders(): IdleHolder[] {
    if (!this.host.canStopIdle) return [];
    const { slots } = this.host;
    const idle: IdleHolder[] = [];
    for (const r of this.held.keys()) {
      if (r.state !== 'ready' || slots.inflight(r.slot) > 0) continue;
      idle.push({ replica: r.id, lastUsed: slots.idleSince(r.slot), evict: (forService) => this.evict(r, forService) });
    }
    return idle;
  }

  start(units: readonly number[]): string | undefined {
    const why = this.launcher.wanted();
    if (why === undefined) return undefined;
    const r = this.launcher.start(why, units);
    if (r === undefined) return undefined;
    this.held.set(r, units);
    return r.id;
  }

  watchIdle(on: boolean): void {
    this.host.slots.watchIdle(on);
  }

  /** `r`'s process is being stopped: its units come back at its exit. */
  stopping(r: ManagedReplica): void {
    if (this.held.has(r)) this.pool.stopping(r.id);
  }

  /** `r`'s process has exited, or was never spawned: its units are free. */
  released(r: ManagedReplica): void {
    if (this.held.delete(r)) this.pool.release(r.id);
  }

  /** Stops an idle replica for another service's start: only through the slot table's compare-exchange, which a request taken meanwhile wins. */
  private evict(r: ManagedReplica, forService: string): boolean {
    const { slots } = this.host;
    if (r.state !== 'ready' || !this.host.canStopIdle) return false;
    const idleMs = Math.max(0, Math.round(Date.now() - slots.idleSince(r.slot)));
    if (!slots.retireIfIdle(r.slot)) return false;
    return this.host.transition(r, 'draining', 'evicted', { pool: this.pool.name, for: forService, idleMs });
  }
}
