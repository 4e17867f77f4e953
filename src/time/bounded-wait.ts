// A wait for something that should end soon, bounded: closing a replica's connection pool
// (data/replica-view.ts), a worker thread's exit (gateway/worker-pool.ts), the end of the
// EndpointSlice watch loop (control/kinds/kubernetes/endpoint-watch.ts), the log destination's
// flush before an exit (cli/serve.ts). Off the hot path: one timer per wait.

/**
 * Resolves `true` once `promise` settles (resolved or rejected: either way it is over), or
 * `false` after `ms` if it has not. Never rejects; the timer is cleared as soon as it is decided.
 */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const settled = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    promise.then(settled, settled);
  });
}
