// The upstream connection manager: one undici Pool per replica, HTTP/1.1 keep-alive, with the
// service's timeouts instead of undici's 300 s defaults (ARCHITECTURE fact 8).
import { Pool } from 'undici';
import type { ServiceConfig } from '../config-types.js';

/**
 * How long an idle keep-alive connection to a replica is kept open when the replica sends no
 * `Keep-Alive: timeout` hint. Below the 5 s idle timeout of common model servers (uvicorn,
 * Node's http), so Sluice never sends a request on a connection the replica is closing.
 */
const KEEP_ALIVE_MS = 4_000;
/** How long a TCP connect to a replica may take before it counts as unreachable. */
const CONNECT_TIMEOUT_MS = 10_000;

export function createPool(origin: string, service: ServiceConfig): Pool {
  return new Pool(origin, {
    // One request per connection at a time: no pipelining, so a slow answer never blocks another.
    pipelining: 1,
    // Unlimited connections per replica unless the service limits concurrency.
    connections: service.replicas.concurrency > 0 ? service.replicas.concurrency : null,
    keepAliveTimeout: KEEP_ALIVE_MS,
    keepAliveMaxTimeout: 600_000,
    headersTimeout: service.timeouts.responseHeadersMs,
    bodyTimeout: service.timeouts.bodyIdleMs,
    connectTimeout: CONNECT_TIMEOUT_MS,
    // The replica's answer is relayed chunk by chunk; no size limit on headers beyond the default.
  });
}
