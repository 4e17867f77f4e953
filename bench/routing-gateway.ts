// The real gateway for the routing simulation (bench/routing.ts) and the pool benchmark
// (bench/pool-swaps.ts), run as its own process: the config comes whole from BENCH_ROUTING_CONFIG
// (JSON), validated by the real loader.
import { parseConfig } from '../src/config/load.js';
import { createLogger } from '../src/log/logger.js';
import { startGateway } from '../src/gateway/gateway.js';
import { loadUwsBuild } from '../src/http/uws-build.js';
import { announceReady, exitOnStop } from './lib/child-side.js';

const config = parseConfig(JSON.parse(process.env['BENCH_ROUTING_CONFIG'] ?? '{}'));
const logger = createLogger(config.log.level);
await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined); // as `sluice serve` chooses
const gateway = await startGateway(config, { logger });
announceReady(gateway.port);
exitOnStop(async () => {
  await gateway.close();
  logger.flush();
});
