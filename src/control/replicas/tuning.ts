// Timings of the control plane that tests shorten; production uses the defaults.

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
}

export const DEFAULT_TUNING: Readonly<ReplicaSetTuning> = Object.freeze({
  readinessPollMs: 10,
  probeIntervalMs: 2_000,
  recoveryProbeMs: 500,
  probeTimeoutMs: 2_000,
  backoffBaseMs: 250,
  backoffMaxMs: 5_000,
  stableMs: 10_000,
  stopGraceMs: 5_000,
  poolCloseMs: 1_000,
});
