// The names of a replica's states: the control plane's state machine moves replicas between them
// (src/control/service/replica.ts), and metrics and the status page report them.

/**
 * Where a replica is in its life. Only `ready` replicas are handed out (and, for a static set
 * whose every replica is `unreachable`, the one that failed longest ago).
 */
export type ReplicaStateName =
  /** Created: a launched replica's process is spawned (or its port is being chosen) and its
   *  readiness probe has not answered 2xx yet. A static replica passes through at once. */
  | 'starting'
  /** In rotation: requests are handed to it, up to `concurrency`. */
  | 'ready'
  /** Out of rotation after a refused connection (`release(r, 'unreachable')`) or a failed
   *  periodic probe; probed every few hundred ms and back to `ready` when a probe succeeds. */
  | 'unreachable'
  /** Asked to stop (idle, or the set is closing): SIGTERM sent, SIGKILL after a grace; no new
   *  requests. A draining replica still counts toward `max` until its process has exited. */
  | 'draining'
  /** Terminal: stopped on purpose and its process has exited. */
  | 'stopped'
  /** Terminal: did not become ready (exit, spawn error, start timeout) or exited on its own. */
  | 'failed';
