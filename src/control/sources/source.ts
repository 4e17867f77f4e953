// A replica source: the seam between the control plane and whatever runs the replicas. It starts
// or stops replicas and says where they are; the state machine, the queue, scaling decisions and
// probes (src/control/replicas/) do not know which kind it is, and the data plane never sees it.
// Kinds: static (`replicas.urls`, run elsewhere) and process (`replicas.command`, child
// processes); a Kubernetes source (scale subresource, EndpointSlices) plugs in here.
import type { ProcessExit } from '../../replicas/launchers/process.js';
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
  /** As `/status` names it. */
  readonly kind: 'static' | 'launched';
  /** True when the control plane may start replicas on demand (and stop idle ones). */
  readonly scalable: boolean;
  /** Replicas that exist from the start and are routed to at once (static URLs). */
  initial(): Endpoint[];
  /**
   * Starts a replica for `r` (state `starting`): resolves with its endpoint once it runs (its
   * readiness is the control plane's probe), or rejects with the reason. `onExit` is called once,
   * when the replica's process is gone.
   */
  start(r: ManagedReplica, why: string, onExit: (exit: ProcessExit) => void): Promise<Endpoint>;
  /** Asks the replica to stop; resolves when it has (at once for replicas run elsewhere). */
  stop(r: ManagedReplica, graceMs: number): Promise<void>;
}
