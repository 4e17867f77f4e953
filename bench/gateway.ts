// `sluice`: the real gateway (parseConfig + createLogger + startGateway), run as its own process
// by the benchmark, relaying one service to the benchmark's replica.
// Settings: BENCH_REPLICA_URL (required), BENCH_LOG_LEVEL (default warn).
// Logs go where production sends them: pino's default destination, fd 1 (the parent points it at
// a file, so the cost of writing every access-log line at `info` is measured, not a pipe's).
import { parseConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startGateway } from '../src/server.js';
import { announceReady, exitOnStop } from './lib/child-side.js';
import { BENCH_SLUG, BENCH_TOKEN_SHA256 } from './lib/workload.js';

const replicaUrl = process.env['BENCH_REPLICA_URL'];
if (replicaUrl === undefined || replicaUrl === '') {
  process.stderr.write('bench gateway: BENCH_REPLICA_URL is required\n');
  process.exit(2);
}

const config = parseConfig({
  listen: { host: '127.0.0.1', port: 0 },
  workers: 1, // what startGateway serves today (one front-end thread); says so instead of a warning
  log: { level: process.env['BENCH_LOG_LEVEL'] || 'warn' },
  services: [
    {
      slug: BENCH_SLUG,
      tokens: [{ name: 'bench', sha256: BENCH_TOKEN_SHA256 }],
      replicas: { urls: [replicaUrl] },
    },
  ],
});
const logger = createLogger(config.log.level);
const gateway = await startGateway(config, { logger });
announceReady(gateway.port);
exitOnStop(async () => {
  await gateway.close();
  logger.flush();
});
