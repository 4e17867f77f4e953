// Passive outlier detection, in the manner of Envoy's (docs/operations.md#ejected-replicas): a
// replica that fails EJECT_AFTER_FAILURES requests in a row before its status line — connection
// refused, reset, or the status-line deadline missed while the service's other replicas answer —
// is taken out of rotation for a backoff, then put back on probation.
//
// - Counting is the data planes' (slots.ts `failed`/`answered`: every thread adds to one shared
//   count; an answer resets it); a data plane reports once the count reaches the threshold, and
//   the control plane decides here. Failures are not the hot path; answers cost one read.
// - Backoff: `ejectionBaseMs` (30 s), doubling per repeat ejection up to `ejectionMaxMs` (5 min);
//   a replica back in rotation for `ejectionResetMs` (10 min) without a new ejection starts over.
// - Probation: a returning replica's count is set one short of the threshold, so one failure
//   before its first answer ejects it again (with the doubled backoff); an answer clears it.
// - Never more than half of the service's replicas in rotation or out of it (`ready` and
//   `unreachable`) are ejected at once: a service of one replica is never ejected.
// - `timeout` ejects only while another replica of the service, ready and not ejected, is not
//   failing (its count is 0): when every replica is slow, the deadline is too short, not one
//   replica broken.
// - An ejected replica keeps its state (`ready`, or `unreachable` if a probe or a refused
//   connection took it out meanwhile); only its shared slot says EJECTED, so no thread chooses it,
//   the queue's grants skip it, and an idle launched replica may still be stopped. Leaving the
//   live states (draining, failed, stopped) ends the ejection.
// - A replica ejected for refused connections that a recovery probe finds accepting again returns
//   then, on probation (as Envoy un-ejects on a passing active health check); one ejected for
//   resets or timeouts waits out its backoff: those pass probes while failing requests.
import type { Logger } from '../../log/logger.js';
import type { ReplicaEvents } from '../../replicas/events.js';
import type { SlotControl } from '../../replicas/slot-control.js';
import { EJECTED, READY } from '../../replicas/slots.js';
import type { FailureReason } from '../../replicas/outcomes.js';
import { EJECT_AFTER_FAILURES } from '../../tunables.js';
import { backoffMs } from '../../time/backoff.js';
import type { EjectionSnapshot } from './control-types.js';
import type { ManagedReplica } from './replica.js';
import type { ReplicaSetTuning } from './tuning.js';

/** A replica's ejection record, kept here for as long as the replica object lives. */
interface Ejection {
  /** `Date.now()` when the current ejection ends; 0 while not ejected. */
  until: number;
  /** Why it was last ejected. */
  reason: FailureReason | null;
  /** Ejections so far. */
  count: number;
  /** Ejections since its last healthy spell: the backoff's exponent. */
  streak: number;
  /** `performance.now()` when it last returned from an ejection. */
  returnedAt: number;
  timer: NodeJS.Timeout | undefined;
}

/** What ejections need from the service. */
export interface EjectionOwner {
  replicas(): Iterable<ManagedReplica>;
  /** A replica returned to rotation: queued requests may have a place now. */
  returned(r: ManagedReplica): void;
}

export class Ejections {
  constructor(
    private readonly slug: string,
    private readonly slots: SlotControl,
    private readonly tuning: ReplicaSetTuning,
    private readonly log: Logger,
    private readonly events: ReplicaEvents | undefined,
    private readonly owner: EjectionOwner,
  ) {}

  /** Each replica's record, made at its first ejection. */
  private readonly records = new WeakMap<ManagedReplica, Ejection>();

  private record(r: ManagedReplica): Ejection {
    let e = this.records.get(r);
    if (e === undefined) {
      e = { until: 0, reason: null, count: 0, streak: 0, returnedAt: 0, timer: undefined };
      this.records.set(r, e);
    }
    return e;
  }

  /** True while `r` is out of rotation for a backoff. */
  private ejected(r: ManagedReplica): boolean {
    return (this.records.get(r)?.until ?? 0) !== 0;
  }

  /** What /status shows of a replica's ejections; undefined if it was never ejected. */
  snapshot(r: ManagedReplica): EjectionSnapshot | undefined {
    const e = this.records.get(r);
    if (e === undefined || e.count === 0) return undefined;
    return { ejected: e.until !== 0, until: e.until === 0 ? null : new Date(e.until).toISOString(), reason: e.reason, ejections: e.count };
  }

  /** A data plane reports `r` failing in a row, the last time for `reason`: eject it if the rules allow. */
  failing(r: ManagedReplica, reason: FailureReason): void {
    if (this.ejected(r) || (r.state !== 'ready' && r.state !== 'unreachable')) return;
    const failures = this.slots.failures(r.slot);
    if (failures < EJECT_AFTER_FAILURES) return; // an answer came meanwhile
    let population = 0;
    let ejected = 0;
    let othersAnswer = false;
    for (const other of this.owner.replicas()) {
      if (other.state !== 'ready' && other.state !== 'unreachable') continue;
      population++;
      if (this.ejected(other)) ejected++;
      else if (other !== r && other.state === 'ready' && this.slots.failures(other.slot) === 0) othersAnswer = true;
    }
    if (2 * (ejected + 1) > population) return;
    if (reason === 'timeout' && !othersAnswer) return;
    this.eject(r, reason, failures);
  }

  private eject(r: ManagedReplica, reason: FailureReason, failures: number): void {
    const e = this.record(r);
    const now = performance.now();
    if (e.returnedAt !== 0 && now - e.returnedAt >= this.tuning.ejectionResetMs) e.streak = 0;
    e.streak++;
    e.count++;
    const waitMs = backoffMs(this.tuning.ejectionBaseMs, this.tuning.ejectionMaxMs, e.streak);
    e.until = Date.now() + waitMs;
    e.reason = reason;
    this.slots.setFailures(r.slot, 0);
    if (r.state === 'ready') this.slots.setState(r.slot, EJECTED);
    e.timer = setTimeout(() => this.end(r), waitMs);
    e.timer.unref();
    this.log.warn({ service: this.slug, replica: r.id, reason, backoffMs: waitMs, failures, ejections: e.count }, 'replica ejected');
    this.events?.replicaEjected(this.slug, r.id, reason);
  }

  /** The backoff is over (or a probe found a refusing replica accepting): back in rotation, on probation. */
  private end(r: ManagedReplica, inTransition = false): void {
    const e = this.records.get(r);
    if (e === undefined) return;
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    if (e.until === 0) return;
    e.until = 0;
    e.returnedAt = performance.now();
    this.slots.setFailures(r.slot, EJECT_AFTER_FAILURES - 1);
    this.log.info({ service: this.slug, replica: r.id, reason: e.reason, ejections: e.count }, 'replica returned from ejection');
    // Entering `ready`, the transition sets the slot and hands out the queue itself.
    if (inTransition || r.state !== 'ready') return;
    this.slots.setState(r.slot, READY);
    this.owner.returned(r);
  }

  /**
   * The shared slot state of a replica entering `ready` from `from`: EJECTED while its backoff
   * runs, unless it was ejected for refused connections and a probe found it accepting again.
   * Called by the transition before it sets the state (so `end` does not set it, nor dispatch).
   */
  readyState(r: ManagedReplica, from: string): number {
    const e = this.records.get(r);
    if (e === undefined || e.until === 0) return READY;
    if (from !== 'unreachable' || e.reason !== 'refused') return EJECTED;
    this.end(r, true);
    return READY;
  }

  /** The replica left the live states (draining, failed, stopped): its ejection ends with it. */
  forget(r: ManagedReplica): void {
    const e = this.records.get(r);
    if (e === undefined) return;
    if (e.timer !== undefined) clearTimeout(e.timer);
    e.timer = undefined;
    e.until = 0;
  }
}
