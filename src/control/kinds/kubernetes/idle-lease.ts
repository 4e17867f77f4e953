// Idle scale-down across gateways, coordinated through one Lease per service (docs/kubernetes.md).
//
// The Lease `sluice-<service>` (coordination.k8s.io/v1) holds when any gateway last relayed a
// request to the service:
//   spec.renewTime             the end of the latest traffic any gateway reported (MicroTime)
//   spec.holderIdentity        the gateway that wrote last
//   spec.leaseDurationSeconds  idleTimeoutMs, rounded up (for people reading the Lease)
//   spec.acquireTime           when a gateway last lowered the Deployment to `min` after idling
//
// Each gateway:
// - while it relays or holds queued requests, moves its own "last active" clock forward and writes
//   it to the Lease at most every idleTimeoutMs / 4 (but never more often than every 250 ms), and
//   once more when its traffic ends, so the Lease is never more than that behind, and a stream
//   longer than idleTimeoutMs keeps the Lease fresh;
// - when neither its own clock nor the Lease has moved for idleTimeoutMs and the Deployment is
//   above `min`, claims the decision by updating the Lease (conditional on the resourceVersion it
//   read: a gateway that renewed meanwhile makes the claim fail with 409, and the claimer looks
//   again), then lowers the Scale to `min` (conditional on the Scale it read). Of N gateways that
//   decide at once, one write lands; the others read `min` and stop.
// Times are wall-clock (the Lease is shared between machines); gateways' clocks are assumed to
// agree to well within idleTimeoutMs (NTP).
import { type ConfigurationOptions, type CoordinationV1Api, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../../../log/logger.js';
import { type ApiTrouble, callOptions, statusOf } from './api-trouble.js';
import { CONFLICT, type DeploymentScaler } from './scaler.js';

/** The Lease is written at most this often by one gateway, whatever idleTimeoutMs is. */
const LEASE_MIN_RENEW_MS = 250;

interface LeaseReading {
  lease: V1Lease | undefined;
  /** `spec.renewTime` in ms since the epoch, or -Infinity. */
  renewedAt: number;
}

export class IdleCoordinator {
  private active = false;
  /** When this gateway last relayed or queued (wall clock, ms). */
  private lastActiveAt: number;
  /** The `renewTime` this gateway last wrote, and when it wrote it. */
  private written = -Infinity;
  private lastWriteAt = -Infinity;
  private renewing = false;
  private renewTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private checking = false;
  /** False once a check found the Deployment at `min`: no further checks until traffic. */
  private watching = true;
  private stopped = false;
  private readonly options: ConfigurationOptions;
  /** idleTimeoutMs / 4, but never more often than LEASE_MIN_RENEW_MS: a tiny idleTimeoutMs must not
   *  turn the Lease into a stream of API calls. */
  private readonly renewEveryMs: number;

  constructor(
    private readonly api: CoordinationV1Api,
    private readonly scaler: DeploymentScaler,
    private readonly leaseName: string,
    private readonly identity: string,
    private readonly idleTimeoutMs: number,
    private readonly min: number,
    private readonly trouble: ApiTrouble,
    private readonly log: Logger,
    private readonly context: Record<string, unknown>,
    callTimeoutMs: number,
  ) {
    this.lastActiveAt = Date.now();
    this.options = callOptions(callTimeoutMs);
    this.renewEveryMs = Math.max(LEASE_MIN_RENEW_MS, Math.floor(idleTimeoutMs / 4));
  }

  start(): void {
    this.scheduleCheck(this.lastActiveAt + this.idleTimeoutMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.renewTimer);
    clearInterval(this.heartbeat);
    clearTimeout(this.checkTimer);
  }

  /**
   * This gateway relays or queues requests for the service (true), or has nothing (false).
   * Called often while active: then it only moves the clock (the heartbeat renews the Lease).
   */
  activity(active: boolean): void {
    if (this.stopped) return;
    const now = Date.now();
    if (active && this.active) {
      this.lastActiveAt = now;
      return;
    }
    if (active || this.active) this.lastActiveAt = now; // the end of traffic is when idling starts
    if (active) {
      this.heartbeat = setInterval(() => {
        this.lastActiveAt = Date.now();
        this.scheduleRenew();
      }, this.renewEveryMs);
      this.heartbeat.unref();
    } else {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
    this.active = active;
    this.watching = true;
    this.scheduleRenew();
    if (!active) this.scheduleCheck(this.lastActiveAt + this.idleTimeoutMs);
  }

  /** Kubernetes shows `n` live replicas: above `min`, idle checks resume (someone scaled up). */
  replicasSeen(n: number): void {
    if (n > this.min && !this.watching && !this.stopped) {
      this.watching = true;
      this.scheduleCheck(Date.now() + this.idleTimeoutMs);
    }
  }

  // ---- renewing ----------------------------------------------------------------------------------

  private scheduleRenew(): void {
    if (this.stopped || this.renewing || this.renewTimer !== undefined || this.lastActiveAt <= this.written) return;
    const delay = Math.max(0, this.lastWriteAt + this.renewEveryMs - Date.now());
    this.renewTimer = setTimeout(() => {
      this.renewTimer = undefined;
      void this.renew();
    }, delay);
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    this.renewing = true;
    const at = this.lastActiveAt;
    try {
      for (let attempt = 0; ; attempt++) {
        const { lease, renewedAt } = await this.read();
        if (renewedAt >= at) break; // another gateway wrote later traffic already
        try {
          if (lease === undefined) await this.create(at);
          else await this.update(lease, { renewTime: at });
          break;
        } catch (err) {
          const status = statusOf(err);
          if ((status === CONFLICT || status === 404) && attempt < 5) continue; // someone wrote between our read and write
          throw err;
        }
      }
      this.trouble.succeeded('leases.renew');
      this.written = at;
      this.lastWriteAt = Date.now();
    } catch (err) {
      const delay = this.trouble.failed('leases.renew', err);
      // Retry no sooner than the backoff: lastWriteAt is set so scheduleRenew waits it out.
      this.lastWriteAt = Date.now() + delay - this.renewEveryMs;
    } finally {
      this.renewing = false;
    }
    this.scheduleRenew();
  }

  // ---- the idle check ----------------------------------------------------------------------------

  private scheduleCheck(at: number): void {
    if (this.stopped || !this.watching || this.checking) return;
    clearTimeout(this.checkTimer);
    this.checkTimer = setTimeout(() => {
      this.checkTimer = undefined;
      void this.check();
    }, Math.max(0, at - Date.now()));
    this.checkTimer.unref();
  }

  private async check(): Promise<void> {
    if (this.stopped) return;
    this.checking = true;
    let next: number | undefined;
    try {
      next = await this.checkOnce();
      this.trouble.succeeded('idle-check');
    } catch (err) {
      next = Date.now() + this.trouble.failed('idle-check', err);
    } finally {
      this.checking = false;
    }
    if (next === undefined) this.watching = false;
    else this.scheduleCheck(next);
  }

  /** Returns when to look again, or undefined when the Deployment is at `min`. */
  private async checkOnce(): Promise<number | undefined> {
    for (let attempt = 0; attempt < 6; attempt++) {
      const now = Date.now();
      if (this.active) return now + this.idleTimeoutMs;
      if (now - this.lastActiveAt < this.idleTimeoutMs) return this.lastActiveAt + this.idleTimeoutMs;
      const reading = await this.read();
      const last = Math.max(reading.renewedAt, this.lastActiveAt);
      if (now - last < this.idleTimeoutMs) return last + this.idleTimeoutMs;
      const scale = await this.scaler.read();
      if (scale.replicas <= this.min) return undefined;
      try {
        // Claim the decision: fails with 409 if any gateway renewed since our read.
        if (reading.lease === undefined) await this.create(last, now);
        else await this.update(reading.lease, { acquireTime: now });
        if (this.active || this.lastActiveAt > last) continue; // traffic here meanwhile: look again
        await this.scaler.lower(scale, this.min);
      } catch (err) {
        if (statusOf(err) === CONFLICT) continue; // someone renewed, claimed or scaled: look again
        throw err;
      }
      this.log.info(
        { ...this.context, from: scale.replicas, to: this.min, idleMs: now - last, gateway: this.identity },
        'kubernetes deployment scaled down after idle',
      );
      return undefined;
    }
    return Date.now() + this.renewEveryMs;
  }

  // ---- the Lease -----------------------------------------------------------------------------

  private async read(): Promise<LeaseReading> {
    try {
      const lease = await this.api.readNamespacedLease({ name: this.leaseName, namespace: this.scaler.namespace }, this.options);
      return { lease, renewedAt: timeOf(lease.spec?.renewTime) };
    } catch (err) {
      if (statusOf(err) === 404) return { lease: undefined, renewedAt: -Infinity };
      throw err;
    }
  }

  private async create(renewTime: number, acquireTime?: number): Promise<void> {
    await this.api.createNamespacedLease({
      namespace: this.scaler.namespace,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: this.leaseName, labels: { 'app.kubernetes.io/managed-by': 'sluice' } },
        spec: {
          holderIdentity: this.identity,
          leaseDurationSeconds: Math.ceil(this.idleTimeoutMs / 1000),
          renewTime: new V1MicroTime(renewTime),
          ...(acquireTime === undefined ? {} : { acquireTime: new V1MicroTime(acquireTime) }),
        },
      },
    }, this.options);
  }

  private async update(lease: V1Lease, change: { renewTime?: number; acquireTime?: number }): Promise<void> {
    const spec = lease.spec ?? {};
    const renewTime = change.renewTime ?? timeOf(spec.renewTime);
    const acquireTime = change.acquireTime ?? timeOf(spec.acquireTime);
    await this.api.replaceNamespacedLease({
      name: this.leaseName,
      namespace: this.scaler.namespace,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { ...lease.metadata, name: this.leaseName },
        spec: {
          ...spec,
          holderIdentity: this.identity,
          leaseDurationSeconds: Math.ceil(this.idleTimeoutMs / 1000),
          // Read back, times are strings or Dates: the API server takes only MicroTime (fact 15).
          renewTime: Number.isFinite(renewTime) ? new V1MicroTime(renewTime) : undefined,
          acquireTime: Number.isFinite(acquireTime) ? new V1MicroTime(acquireTime) : undefined,
        },
      } as V1Lease,
    }, this.options);
  }
}

/** A Lease time as read back (a string or a Date, by the client's deserializer) in ms. */
function timeOf(value: unknown): number {
  if (value === undefined || value === null) return -Infinity;
  const ms = new Date(value as string | Date).getTime();
  return Number.isNaN(ms) ? -Infinity : ms;
}
