// One pool of units (GPUs) shared by the services whose launched replicas take from it
// (`replicas.pool`; docs/configuration.md#pools). One object per pool, written by the main thread
// only: it is the one writer of which replica holds which unit.
//
// - A replica holds its units from before its process is spawned until that process has exited
//   (its GPU memory is free only then): no unit is ever held by two replicas.
// - Whenever something changes (a service wants a start, units are released, a holder becomes
//   idle while a start waits) `settle()` runs: the waiting service ranked first (the priority of
//   the first request in its queue, then that request's age, then config order) gets units if
//   enough are free, and the next one after it, and so on. When too few are free and too few are
//   already on their way back (holders stopping), the least recently used idle holder of the pool
//   (ready, nothing in flight or queued for it, not kept by `min`; by its last request's end) is
//   stopped, and the start waits for its exit. With nothing idle the start waits, its requests
//   queued (bounded by their own wait); the first waiter blocks the ones ranked after it, so a
//   start that needs many units is not starved by smaller ones.
// - Nothing in flight is ever stopped for another service: a holder is stopped only through the
//   slot table's compare-exchange (`retireIfIdle`), which a request taken meanwhile wins.
import type { Logger } from '../../log/logger.js';
import { sharedClock } from '../../replicas/clock.js';
import type { PoolStatus } from '../../admin/pool-status.js';

/** Where a waiting start stands: higher priority first, then the older first request. */
export interface StartRank {
  priority: number;
  /** `sharedClock()` time of its first queued request. */
  arrivedAt: number;
}

/** A replica holding units that may be stopped for another service now. */
export interface IdleHolder {
  replica: string;
  /** `Date.now()` when its last request ended (or it became ready). */
  lastUsed: number;
  /** Stops it for `forService`; false when it took a request meanwhile (it keeps its units). */
  evict(forService: string): boolean;
}

/** What a service whose launched replicas take units from the pool does for it (kinds/launched/pool-seats.ts). */
export interface PoolMember {
  readonly service: string;
  /** Units each of its replicas holds. */
  readonly units: number;
  /** The start it wants now, ranked; undefined when it wants none (or waits out a backoff). */
  wants(): StartRank | undefined;
  /** Its replicas that could be stopped for another service now. */
  idleHolders(): Iterable<IdleHolder>;
  /** Units are free for its start: start a replica holding them; its id, or undefined when it could not (the units stay free). */
  start(units: readonly number[]): string | undefined;
  /** While a start of another service waits on the pool, its replicas say when they become idle (the slot table's flag). */
  watchIdle(on: boolean): void;
}

interface Holding {
  service: string;
  replica: string;
  units: readonly number[];
  /** Its process is being stopped: the units come back at its exit. */
  stopping: boolean;
}

/** A pool as `/status` shows it: the admin's shape (admin/pool-status.ts), given as it is. */
export type PoolSnapshot = PoolStatus;

export class UnitPool {
  private readonly holders: (Holding | undefined)[];
  private readonly members: PoolMember[] = [];
  private readonly evicted = new Map<string, number>();
  /** Members told that a start waits (their replicas report becoming idle). */
  private watching = false;
  /** Members whose wait has been logged (once per wait). */
  private readonly waitLogged = new Set<PoolMember>();
  private settling = false;
  private again = false;
  private closed = false;

  constructor(
    readonly name: string,
    readonly size: number,
    private readonly log: Logger,
  ) {
    this.holders = new Array<Holding | undefined>(size).fill(undefined);
  }

  join(member: PoolMember): void {
    this.members.push(member);
    this.evicted.set(member.service, this.evicted.get(member.service) ?? 0);
  }

  get used(): number {
    let n = 0;
    for (const h of this.holders) if (h !== undefined) n++;
    return n;
  }

  /** The replica's process is being stopped: its units come back at its exit (no eviction needed for them). */
  stopping(replica: string): void {
    for (const h of this.holders) if (h !== undefined && h.replica === replica) h.stopping = true;
  }

  /** The replica's process has exited (or was never spawned): its units are free. */
  release(replica: string): void {
    let freed = false;
    for (let u = 0; u < this.size; u++) {
      if (this.holders[u]?.replica === replica) {
        this.holders[u] = undefined;
        freed = true;
      }
    }
    if (freed) this.settle();
  }

  /** The gateway closes: no more grants (the members' replicas still release their units). */
  close(): void {
    this.closed = true;
    this.watch(false);
  }

  /** Hands free units to the waiting starts in rank order, stopping idle holders for them. */
  settle(): void {
    if (this.settling) {
      this.again = true;
      return;
    }
    this.settling = true;
    try {
      do {
        this.again = false;
        this.round();
      } while (this.again);
    } finally {
      this.settling = false;
    }
  }

  private round(): void {
    const tried = new Set<string>();
    for (;;) {
      const best = this.closed ? undefined : this.first();
      if (best === undefined) {
        this.watch(false);
        return;
      }
      const { member } = best;
      const free = this.freeUnits();
      if (free.length >= member.units) {
        const units = free.slice(0, member.units);
        const replica = member.start(units);
        this.waitLogged.delete(member);
        if (replica === undefined) return; // it cannot start now (no slot yet): it asks again
        const holding: Holding = { service: member.service, replica, units, stopping: false };
        for (const u of units) this.holders[u] = holding;
        continue;
      }
      if (free.length + this.comingBack() >= member.units) return; // holders are stopping: wait for their exits
      // Flag first, then look: a release that empties a replica after this store reports it.
      this.watch(true);
      const victim = this.leastRecentlyUsed(tried);
      if (victim === undefined) {
        if (!this.waitLogged.has(member)) {
          this.waitLogged.add(member);
          this.log.info({ pool: this.name, service: member.service, units: member.units, free: free.length, holders: this.holderList() }, 'pool start waiting');
        }
        return;
      }
      tried.add(victim.holder.replica);
      if (!victim.holder.evict(member.service)) continue;
      this.evicted.set(victim.service, (this.evicted.get(victim.service) ?? 0) + 1);
      this.stopping(victim.holder.replica);
      this.log.info(
        { pool: this.name, service: victim.service, replica: victim.holder.replica, for: member.service, idleMs: Math.max(0, Math.round(Date.now() - victim.holder.lastUsed)) },
        'pool replica evicted',
      );
    }
  }

  /** The waiting start ranked first: highest priority, then oldest first request, then config order. */
  private first(): { member: PoolMember; rank: StartRank } | undefined {
    let best: { member: PoolMember; rank: StartRank } | undefined;
    for (const member of this.members) {
      const rank = member.wants();
      if (rank === undefined) {
        this.waitLogged.delete(member);
        continue;
      }
      if (best === undefined || rank.priority > best.rank.priority || (rank.priority === best.rank.priority && rank.arrivedAt < best.rank.arrivedAt)) best = { member, rank };
    }
    return best;
  }

  private freeUnits(): number[] {
    const free: number[] = [];
    for (let u = 0; u < this.size; u++) if (this.holders[u] === undefined) free.push(u);
    return free;
  }

  /** Units held by replicas whose processes are being stopped. */
  private comingBack(): number {
    let n = 0;
    for (const h of this.holders) if (h?.stopping === true) n++;
    return n;
  }

  private leastRecentlyUsed(tried: ReadonlySet<string>): { service: string; holder: IdleHolder } | undefined {
    let best: { service: string; holder: IdleHolder } | undefined;
    for (const member of this.members) {
      for (const holder of member.idleHolders()) {
        if (tried.has(holder.replica)) continue;
        if (best === undefined || holder.lastUsed < best.holder.lastUsed) best = { service: member.service, holder };
      }
    }
    return best;
  }

  private watch(on: boolean): void {
    if (this.watching === on) return;
    this.watching = on;
    for (const member of this.members) member.watchIdle(on);
  }

  private holderList(): string[] {
    return this.holders.map((h, u) => `${u}:${h === undefined ? 'free' : h.replica}`);
  }

  /** Evictions so far, by service (every member's series, from 0). */
  evictions(): ReadonlyMap<string, number> {
    return this.evicted;
  }

  snapshot(): PoolSnapshot {
    const shared = sharedClock();
    const waiting: PoolSnapshot['waiting'] = [];
    for (const member of this.members) {
      const rank = member.wants();
      // A start for `min` alone has no request: it has waited for nothing (arrivedAt 0).
      if (rank !== undefined) waiting.push({ service: member.service, units: member.units, priority: rank.priority, waitingMs: rank.arrivedAt === 0 ? 0 : Math.max(0, Math.round(shared - rank.arrivedAt)) });
    }
    waiting.sort((a, b) => b.priority - a.priority || b.waitingMs - a.waitingMs);
    return {
      name: this.name,
      size: this.size,
      used: this.used,
      free: this.size - this.used,
      units: this.holders.map((h, unit) => ({ unit, service: h?.service ?? null, replica: h?.replica ?? null, stopping: h?.stopping ?? false })),
      waiting,
      evictions: Object.fromEntries(this.evicted),
    };
  }
}
