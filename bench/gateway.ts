// `sluice`: the real gateway (parseConfig + createLogger + startGateway), run as its own process
// by the benchmark, relaying one service.
// Settings:
//   BENCH_REPLICA_URL    the replica (static service `bench`); required unless BENCH_COLD_STATS is set
//   BENCH_LOG_LEVEL      default warn
//   BENCH_WORKERS        the config's `workers` (default 1, set explicitly)
//   BENCH_OPTIONS        `on` (default): the inference options a production service would turn on,
//                        so the benchmark measures them: keep-alive comments for queued streams
//                        (queue.keepAliveMs), the replica's queue read from its /metrics every
//                        250 ms (replicas.load), session affinity by X-Session-Id (the clients
//                        send one) and a token priority; `off`: none of them (event timing of
//                        streamed answers is always on)
//   BENCH_LIMITS         `off` (default); `local`: the bench token has limits that a run never
//                        reaches (requestsPerMinute 1,000,000 — a burst of a million, then
//                        16,667 a second —, concurrent 100,000, tokensPerMinute 1,000,000,000),
//                        counted in-process, so every request pays the limiter's admission,
//                        reservation and settlement; `redis://…`: the same limits in that Redis
//                        (limits.store), leased in shares as several gateways would
//   BENCH_ROUTER         `on`: the service names the model `bench` and the clients reach it
//                        through a router (slug `bench-router`) whose token is the bench token (its
//                        limits, if any): every request's body is read for its model; `off` (default)
//   BENCH_TRACING        an OTLP/HTTP endpoint: tracing on (`tracing.endpoint`), at
//                        BENCH_TRACE_RATIO (`tracing.sampleRatio`, default 1); unset: off
//   BENCH_SLUICE_SRC     the `dist/src` directory of the build to run (default: this one's): another
//                        build runs this config (the `sluice-other-…` peers)
//   BENCH_COLD_STATS     cold-start mode: the service's replica is launched by the gateway
//                        (bench/replica.js, readyPath /ready, min 0, max 1), and writes its
//                        timings to this file; BENCH_REPLICA_STARTUP_MS is passed on to it
//   BENCH_PAUSES_FILE    record garbage collections and event loop delay, written here on stop
//                        (bench/pauses.ts)
// Logs go where production sends them: pino's default destination, fd 1 (the parent points it at
// a file, so the cost of writing every access-log line at `info` is measured, not a pipe's).
import { existsSync } from 'node:fs';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import { announceReady, exitOnStop } from './lib/child-side.js';
import { recordPausesIfAsked } from './lib/pause-recorder.js';
import { BENCH_MODEL, BENCH_ROUTER_SLUG, BENCH_SLUG, BENCH_TOKEN_SHA256, METRICS_PATH, READY_PATH, SESSION_HEADER } from './lib/workload.js';

// The build to run: this one's, or another's (BENCH_SLUICE_SRC), with the same config.
const src = process.env['BENCH_SLUICE_SRC'];
const module = (path: string): string => (src === undefined || src === '' ? new URL(`../src/${path}`, import.meta.url).href : pathToFileURL(join(resolve(src), path)).href);
const { parseConfig } = (await import(module('config/load.js'))) as typeof import('../src/config/load.js');
const { createLogger } = (await import(module('log/logger.js'))) as typeof import('../src/log/logger.js');
// The composition root is gateway/gateway.js; another build from before the source layout by
// concern has it in control/.
const root = src !== undefined && src !== '' && !existsSync(join(resolve(src), 'gateway/gateway.js')) ? 'control/gateway.js' : 'gateway/gateway.js';
const { startGateway } = (await import(module(root))) as typeof import('../src/gateway/gateway.js');
const { loadUwsBuild } = (await import(module('http/uws-build.js'))) as typeof import('../src/http/uws-build.js');

const replicaUrl = process.env['BENCH_REPLICA_URL'] ?? '';
const coldStats = process.env['BENCH_COLD_STATS'] ?? '';
if (replicaUrl === '' && coldStats === '') {
  process.stderr.write('bench gateway: BENCH_REPLICA_URL or BENCH_COLD_STATS is required\n');
  process.exit(2);
}

const options = process.env['BENCH_OPTIONS'] !== 'off';
const load = options ? { load: { waiting: 'bench_waiting', cacheUsage: 'bench_cache_usage', path: METRICS_PATH, intervalMs: 250 } } : {};
const replicas =
  coldStats === ''
    ? { urls: [replicaUrl], ...load }
    : {
        ...load,
        command: [process.execPath, fileURLToPath(new URL('./replica.js', import.meta.url))],
        env: { BENCH_COLD_STATS: coldStats, BENCH_REPLICA_STARTUP_MS: process.env['BENCH_REPLICA_STARTUP_MS'] || '0' },
        readyPath: READY_PATH,
        startTimeoutMs: 30_000,
        min: 0,
        max: 1,
      };

const limitsSetting = process.env['BENCH_LIMITS'] || 'off';
const tokenLimits = limitsSetting === 'off' ? {} : { limits: { requestsPerMinute: 1_000_000, concurrent: 100_000, tokensPerMinute: 1_000_000_000 } };
const store = limitsSetting.startsWith('redis://') ? { limits: { store: limitsSetting } } : {};
const token = { name: 'bench', sha256: BENCH_TOKEN_SHA256, ...(options ? { priority: 10 } : {}), ...tokenLimits };
const router = process.env['BENCH_ROUTER'] === 'on';
const traces = process.env['BENCH_TRACING'] || '';
const tracing = traces === '' ? {} : { tracing: { endpoint: traces, sampleRatio: Number(process.env['BENCH_TRACE_RATIO'] || 1) } };

const config = parseConfig({
  ...store,
  listen: { host: '127.0.0.1', port: 0 },
  workers: Number(process.env['BENCH_WORKERS'] || 1),
  log: { level: process.env['BENCH_LOG_LEVEL'] || 'warn' },
  services: [
    {
      slug: BENCH_SLUG,
      tokens: [router ? { name: 'bench-service', sha256: BENCH_TOKEN_SHA256 } : token],
      replicas,
      ...(router ? { models: [BENCH_MODEL] } : {}),
      ...(options ? { queue: { keepAliveMs: 15_000 }, routing: { affinityHeader: SESSION_HEADER } } : {}),
    },
  ],
  ...(router ? { routers: [{ slug: BENCH_ROUTER_SLUG, tokens: [token] }] } : {}),
  ...tracing,
});
const logger = createLogger(config.log.level);
await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined); // as `sluice serve` chooses
const gateway = await startGateway(config, { logger });
announceReady(gateway.port);
const writePauses = recordPausesIfAsked();
exitOnStop(async () => {
  writePauses?.();
  await gateway.close();
  logger.flush();
});
