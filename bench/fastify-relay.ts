// `@fastify/http-proxy`: Fastify with its reverse-proxy plugin (undici underneath) in front of the
// replica, as its own process; no request logging. The plugin's undici pool gets enough
// connections for the token-stream and idle-stream scenarios (its default, 128, would queue them).
// Settings: BENCH_REPLICA_URL (required).
import proxy from '@fastify/http-proxy';
import Fastify from 'fastify';
import { announceReady, exitOnStop } from './lib/child-side.js';

const app = Fastify({ logger: false, keepAliveTimeout: 120_000, requestTimeout: 0, bodyLimit: 128 * 1024 * 1024 });
await app.register(proxy, {
  upstream: process.env['BENCH_REPLICA_URL']!,
  undici: { connections: 4096, pipelining: 1, keepAliveTimeout: 30_000 },
});
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
announceReady(typeof address === 'object' && address !== null ? address.port : 0);
exitOnStop(() => app.close());
