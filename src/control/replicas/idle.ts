// Idle stops of launched replicas: a ready replica with nothing in flight for `idleTimeoutMs` is
// stopped, unless `min` needs it or requests are queued. Requests count in the shared slot table,
// whichever thread served them; the table also keeps when the replica's inflight last dropped to 0.
import type { ServiceConfig } from '../../config/types.js';
import type { SlotTable } from '../../replicas/slots.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { ManagedReplica } from './replica.js';

export interface IdleOwner {
  transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean;
  readonly canStopIdle: boolean;
}

export class IdleStops {
  constructor(
    private readonly service: ServiceConfig,
    private readonly slots: SlotTable,
    private readonly owner: IdleOwner,
  ) {}

  /** Starts watching a replica that just became ready. */
  arm(r: ManagedReplica, delay = this.service.replicas.idleTimeoutMs): void {
    r.idleTimer = setTimeout(() => this.check(r), delay);
    r.idleTimer.unref();
  }

  /** The timer fired: stop the replica if it has been idle long enough and may go. */
  private check(r: ManagedReplica): void {
    r.idleTimer = undefined;
    if (r.state !== 'ready') return;
    const limit = this.service.replicas.idleTimeoutMs;
    if (this.slots.inflight(r.slot) > 0) {
      this.arm(r, Math.max(25, Math.ceil(limit / 4))); // busy: look again soon after its next release
      return;
    }
    const idleFor = Date.now() - this.slots.idleSince(r.slot);
    if (idleFor < limit - 1) {
      this.arm(r, Math.ceil(limit - idleFor));
      return;
    }
    // Retiring is a compare-exchange on the shared state: a request taken meanwhile keeps it.
    if (!this.owner.canStopIdle || !this.slots.retireIfIdle(r.slot)) {
      this.arm(r, limit);
      return;
    }
    this.owner.transition(r, 'draining', 'idle', { idleMs: Math.round(idleFor) });
  }
}
