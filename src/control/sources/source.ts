// Replica sources: the seam between the control plane and whatever runs the replicas. The state
// machine, the queue and probes (src/control/replicas/) treat every replica alike, and the data
// plane never sees a source. Three kinds:
// - static (`replicas.urls`, static.ts): replicas run elsewhere, listed once;
// - launched (`replicas.command`, process.ts): a `ReplicaSource` that starts and stops child
//   processes when the control plane decides (replicas/launches.ts);
// - kubernetes (`replicas.kubernetes`, kubernetes/): Kubernetes runs the pods and the source
//   pushes their endpoint list (replicas/endpoint-replicas.ts turns it into replicas); the control
//   plane only reports demand to it, and it scales the Deployment.
import type { ProcessExit } from './replica-process.js';
import type { ManagedReplica } from '../replicas/replica.js';

/** Where a replica answers. */
export interface Endpoint {
  /** `http://10.0.0.5:9000`: scheme, host and port. */
  origin: string;
  /** The `Host` header value. */
  host: string;
  /** For the TCP probe: host name (IPv6 without brackets) and port. */
  probeHost: string;
  probePort: number;
}

export interface ReplicaSource {
  /**
   * Starts a replica for `r` (state `starting`): resolves with its endpoint once it runs (its
   * readiness is the control plane's probe), or rejects with the reason. `onExit` is called once,
   * when the replica's process is gone.
   */
  start(r: ManagedReplica, why: string, onExit: (exit: ProcessExit) => void): Promise<Endpoint>;
  /** Asks the replica to stop; resolves when it has (at once for replicas run elsewhere). */
  stop(r: ManagedReplica, graceMs: number): Promise<void>;
}
