// Idle stops of launched replicas: a ready replica with nothing in flight for `idleTimeoutMs` is
// stopped, unless `min` needs it, requests are queued, or a request's `X-Sluice-Keep-Alive` keeps
// it loaded until later (the slot table's keep-until, written by the thread that released it). Requests count in the shared slot table,
// whichever thread served them; the table also keeps when the replica's inflight last dropped to 0.
import type { ManagedReplica } from '../../service/replica.js';
import type { ReplicaHost } from '../../service/kind-policy.js';

export class IdleStops {
  /** The idle check of each ready replica. */
  private readonly timers = new Map<ManagedReplica, NodeJS.Timeout>();

  constructor(private readonly host: ReplicaHost) {}

  /** Starts watching a replica that just became ready. */
  arm(r: ManagedReplica, delay = this.host.service.replicas.idleTimeoutMs): void {
    const timer = setTimeout(() => this.check(r), delay);
    timer.unref();
    this.timers.set(r, timer);
  }

  /** Stops watching it (it left `ready`, or the service closes). */
  disarm(r: ManagedReplica): void {
    const timer = this.timers.get(r);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.timers.delete(r);
  }

  /** The admin `unload`: every watched (ready) replica with nothing in flight stops now, down to `min`. */
  stopAllNow(): { stopped: string[]; kept: string[] } {
    const stopped: string[] = [];
    const kept: string[] = [];
    const { slots } = this.host;
    const min = this.host.service.replicas.min;
    for (const r of [...this.timers.keys()]) {
      // Retiring is a compare-exchange on the shared state: a request taken meanwhile keeps it.
      if (r.state !== 'ready' || this.host.counts().live <= min || !slots.retireIfIdle(r.slot)) {
        kept.push(r.id);
        continue;
      }
      const idleMs = Math.max(0, Math.round(Date.now() - slots.idleSince(r.slot)));
      if (this.host.transition(r, 'draining', 'unloaded', { idleMs })) stopped.push(r.id);
      else kept.push(r.id);
    }
    return { stopped, kept };
  }

  close(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  /** The timer fired: stop the replica if it has been idle long enough and may go. */
  private check(r: ManagedReplica): void {
    this.timers.delete(r);
    if (r.state !== 'ready') return;
    const { slots } = this.host;
    const limit = this.host.service.replicas.idleTimeoutMs;
    if (slots.inflight(r.slot) > 0) {
      this.arm(r, Math.max(25, Math.ceil(limit / 4))); // busy: look again soon after its next release
      return;
    }
    const now = Date.now();
    // A caller asked to keep it loaded (`X-Sluice-Keep-Alive`, bounded by keepAliveMaxMs): look again then.
    const keptFor = slots.keptUntil(r.slot) - now;
    if (keptFor > 0) {
      this.arm(r, Math.ceil(keptFor));
      return;
    }
    const idleFor = now - slots.idleSince(r.slot);
    if (idleFor < limit - 1) {
      this.arm(r, Math.ceil(limit - idleFor));
      return;
    }
    // Retiring is a compare-exchange on the shared state: a request taken meanwhile keeps it.
    if (!this.host.canStopIdle || !slots.retireIfIdle(r.slot)) {
      this.arm(r, limit);
      return;
    }
    this.host.transition(r, 'draining', 'idle', { idleMs: Math.round(idleFor) });
  }
}
