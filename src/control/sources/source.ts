// Replica sources: the seam between the control plane and whatever runs the replicas. The state
// machine, the queue and probes (src/control/service/) treat every replica alike, and the data
// plane never sees a source. Each kind of replicas (src/control/kinds/) reads its own:
// - static (`replicas.urls`, static.ts): replicas run elsewhere, listed once;
// - launched (`replicas.command`, process.ts): a `ReplicaSource` that starts and stops child
//   processes when the control plane decides (kinds/launched/launches.ts);
// - kubernetes (`replicas.kubernetes`, kubernetes/): Kubernetes runs the pods and the source
//   pushes their endpoint list (kinds/kubernetes/endpoint-replicas.ts turns it into replicas);
//   the control plane only reports demand to it, and it scales the Deployment.
// A source knows nothing of the state machine: it is handed what it needs and answers with what
// it started.
import type { ProcessExit, ReplicaProcess } from './replica-process.js';

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

/** What a source is asked to start. */
export interface StartRequest {
  /** The replica's id (logs). */
  id: string;
  /** Why it starts (logs): `queued requests`, `min`. */
  why: string;
  /** The pool units it holds (`{units}` in its command and env), if its service has a pool. */
  units?: readonly number[] | undefined;
  /** True once the replica is no longer wanted (the service closed meanwhile): start nothing. */
  abandoned(): boolean;
  /** Called once, when the replica's process is gone, with that process (a process that could not
   *  be spawned may be reported before `start` has resolved). */
  onExit(exit: ProcessExit, process: ReplicaProcess): void;
}

/** What a source started: where it answers, and the process that runs it. */
export interface Started {
  endpoint: Endpoint;
  process: ReplicaProcess;
}

export interface ReplicaSource {
  /**
   * Starts a replica: resolves with its endpoint and process once it runs (its readiness is the
   * control plane's probe), or rejects with the reason.
   */
  start(request: StartRequest): Promise<Started>;
}
