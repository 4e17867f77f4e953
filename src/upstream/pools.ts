// The upstream connection manager's entry point: one UpstreamPool (pool.ts) per replica, HTTP/1.1
// keep-alive on raw sockets, with the service's timeouts (ARCHITECTURE fact 8).
import type { ServiceConfig } from '../config-types.js';
import { UpstreamPool } from './pool.js';

/** How long a TCP connect to a replica may take before it counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

/** A pool for the replica at `origin` (`http://host:port`, as validated by the config loader). */
export function createPool(origin: string, service: ServiceConfig): UpstreamPool {
  const url = new URL(origin);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return new UpstreamPool(host, url.port === '' ? 80 : Number(url.port), {
    // One request per connection at a time (no pipelining); at most `concurrency` connections.
    maxConnections: service.replicas.concurrency,
    connectMs: CONNECT_TIMEOUT_MS,
    headersMs: service.timeouts.responseHeadersMs,
    bodyIdleMs: service.timeouts.bodyIdleMs,
  });
}
