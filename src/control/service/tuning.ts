// Timings of the control plane that tests shorten; production uses the defaults (REPLICA_TIMINGS).
import { backoffMs } from '../../time/backoff.js';

/** The control plane's replica timings: `DEFAULT_TUNING` below says what each is. */
const REPLICA_TIMINGS = {
  readinessPollMs: 10,
  probeIntervalMs: 2_000,
  recoveryProbeMs: 500,
  probeTimeoutMs: 2_000,
  backoffBaseMs: 250,
  backoffMaxMs: 5_000,
  stableMs: 10_000,
  stopGraceMs: 5_000,
  poolCloseMs: 1_000,
  ejectionBaseMs: 30_000,
  ejectionMaxMs: 300_000,
  ejectionResetMs: 600_000,
} as const;

export interface ReplicaSetTuning {
  /** Readiness poll of a starting replica: this interval (at least) for its first 2 s, then at
   *  least 25 ms until 30 s, then at least 100 ms. */
  readinessPollMs: number;
  /** Periodic probe of a ready static replica when `readyPath` is set. */
  probeIntervalMs: number;
  /** Probe of an out-of-rotation (`unreachable`) replica. */
  recoveryProbeMs: number;
  /** One probe's connect and answer limit. */
  probeTimeoutMs: number;
  /** First backoff after a failed start; doubles per consecutive failure. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** A replica ready this long resets the consecutive failure count. */
  stableMs: number;
  /** SIGTERM → SIGKILL grace when stopping a replica process. */
  stopGraceMs: number;
  /** How long closing a replica's pool may wait for its requests before destroying it. */
  poolCloseMs: number;
  /** First ejection of a replica (consecutive failures, ejections.ts); doubles per repeat ejection. */
  ejectionBaseMs: number;
  ejectionMaxMs: number;
  /** A replica back in rotation this long without being ejected again starts over at `ejectionBaseMs`. */
  ejectionResetMs: number;
}

export const DEFAULT_TUNING: Readonly<ReplicaSetTuning> = Object.freeze({ ...REPLICA_TIMINGS });

/**
 * The wait before the next start after failed ones: `backoffBaseMs`, doubling per consecutive
 * failure up to `backoffMaxMs`; the count resets once a replica has stayed ready for `stableMs`,
 * so a crash loop after readiness backs off too.
 */
export class StartBackoff {
  private failures = 0;
  private lastFailureAt = -Infinity;
  private lastReadyAt = -Infinity;
  private until = 0;

  constructor(private readonly tuning: ReplicaSetTuning) {}

  ready(now: number): void {
    this.lastReadyAt = now;
  }

  /** A replica failed at `now`: the backoff it imposes, in ms. */
  failed(now: number): number {
    if (this.lastReadyAt > this.lastFailureAt && now - this.lastReadyAt >= this.tuning.stableMs) this.failures = 0;
    this.failures++;
    this.lastFailureAt = now;
    const ms = backoffMs(this.tuning.backoffBaseMs, this.tuning.backoffMaxMs, this.failures);
    this.until = now + ms;
    return ms;
  }

  /** How long the next start must still wait (0: now). */
  waitMs(now: number): number {
    return now < this.until ? this.until - now : 0;
  }
}
