// The roster of one service's replicas on the control plane: every replica holding a place (its
// slot in the shared table, src/replicas/slots.ts), how many are ready, starting and live, and
// what every data plane has been told of them (announced with an address, gone). The state machine
// (service-control.ts) decides every move and is the roster's one caller, so the counts never
// drift from the set they count.
//
// - A place: a slot claimed for a new replica (`enlist`), freed with the replica once its
//   process is gone (`remove`: the slot EMPTY, every data plane told that it is gone). A slot
//   holds one replica at a time, so a slot and its generation name at most one (`find`).
// - The panic fallback (a kind's `panicFallback`): with every replica out of rotation, the one
//   taken out longest ago is written into the slot table to be handed out anyway.
import type { ReplicaInfo } from '../../threads/link.js';
import type { SlotControl } from '../../replicas/slot-control.js';
import { EMPTY } from '../../replicas/slots.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { Endpoint } from '../sources/source.js';
import type { ViewRouter } from './control-types.js';
import { isLive, ManagedReplica } from './replica.js';

export class ReplicaRoster {
  /** Every replica holding a place: not terminal, or terminal with its process still exiting. */
  readonly all = new Set<ManagedReplica>();
  /** Generation per slot of the replica the control plane has announced (-1: none). */
  readonly known: Int32Array;
  private readyCount = 0;
  private startingCount = 0;
  /** Replicas in `starting`, `ready` or `unreachable` (counted against `min`). */
  private liveCount = 0;
  private lastId = 0;

  constructor(
    private readonly slug: string,
    private readonly slots: SlotControl,
    private readonly views: ViewRouter,
  ) {
    this.known = new Int32Array(slots.slots).fill(-1);
  }

  get ready(): number {
    return this.readyCount;
  }

  get starting(): number {
    return this.startingCount;
  }

  get live(): number {
    return this.liveCount;
  }

  /** A new replica in `starting` with a slot of its own; undefined when no slot is free. */
  enlist(): ManagedReplica | undefined {
    const slot = this.slots.claim();
    if (slot < 0) return undefined;
    const r = new ManagedReplica(`${this.slug}-${++this.lastId}`, slot, this.slots.gen(slot), performance.now());
    this.all.add(r);
    this.startingCount++;
    this.liveCount++;
    return r;
  }

  /** The replica has an address: every data plane learns it. */
  place(r: ManagedReplica, endpoint: Endpoint): void {
    r.origin = endpoint.origin;
    r.host = endpoint.host;
    r.probeHost = endpoint.probeHost;
    r.probePort = endpoint.probePort;
    this.known[r.slot] = r.gen;
    const info = this.info(r);
    for (const view of this.views.all()) view.announce(info);
  }

  /** `r` moved `from` → `to`: the counts follow. */
  moved(from: ReplicaStateName, to: ReplicaStateName): void {
    if (from === 'starting') this.startingCount--;
    if (from === 'ready') this.readyCount--;
    if (to === 'ready') this.readyCount++;
    if (isLive(from)) this.liveCount--;
    if (isLive(to)) this.liveCount++;
  }

  /** Frees a terminal replica's place and its slot; false when it held none (already removed). */
  remove(r: ManagedReplica): boolean {
    if (!this.all.delete(r)) return false;
    this.known[r.slot] = -1;
    this.slots.setState(r.slot, EMPTY);
    if (r.origin !== '') for (const view of this.views.all()) view.gone(r.slot, r.gen);
    return true;
  }

  /** The replica in `slot` with generation `gen`, if it still holds its place. */
  find(slot: number, gen: number): ManagedReplica | undefined {
    for (const r of this.all) if (r.slot === slot && r.gen === gen) return r;
    return undefined;
  }

  /** What a new data plane must be told about: every replica with an address. */
  infos(): ReplicaInfo[] {
    const list: ReplicaInfo[] = [];
    for (const r of this.all) if (r.origin !== '') list.push(this.info(r));
    return list;
  }

  /** The panic fallback: the replica out of rotation longest, tried when nothing is in rotation. */
  updateFallback(): void {
    let best: ManagedReplica | undefined;
    for (const r of this.all) if (r.state === 'unreachable' && (best === undefined || r.failedAt < best.failedAt)) best = r;
    this.slots.setFallback(best === undefined ? -1 : best.slot);
  }

  private info(r: ManagedReplica): ReplicaInfo {
    return { slot: r.slot, gen: r.gen, id: r.id, origin: r.origin, host: r.host };
  }
}
