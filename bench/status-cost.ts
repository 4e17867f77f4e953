// What the service overview costs the gateway's thread, measured in-process with the real parts
// (Metrics, replica sets, the status source and board), a few seconds, no load generator:
//   - one GET /status answer: the document built from the replica sets' snapshots, then JSON;
//   - one sample: the counters read from prom-client, once a second whatever the traffic;
//   - one event-stream tick: the status and the newest chart points, once a second per open page.
// The relay's per-request path is not touched by the overview (it reads counters the relay keeps
// anyway), so there is no per-request figure to measure.
// Run: npm run build && node dist/bench/status-cost.js   (BENCH_SERVICES=3, BENCH_STATUS_MS=2000)
import { parseConfig } from '../src/config/load.js';
import { createLogger } from '../src/log/logger.js';
import { Metrics } from '../src/metrics/metrics.js';
import { createReplicaSet } from '../src/gateway/local-replica-set.js';
import { StatusBoard } from '../src/admin/status.js';
import { createStatusSource } from '../src/admin/status-source.js';

const SERVICES = Number(process.env['BENCH_SERVICES'] ?? '3');
const MS = Number(process.env['BENCH_STATUS_MS'] ?? '2000');

const config = parseConfig({
  listen: { host: '127.0.0.1', port: 0 },
  admin: { host: '127.0.0.1', port: 0 },
  log: { level: 'silent' },
  services: Array.from({ length: SERVICES }, (_, i) => ({
    slug: `svc-${i}`,
    tokens: [{ name: 't', sha256: 'a'.repeat(64) }],
    replicas: { urls: ['http://127.0.0.1:9', 'http://127.0.0.1:10'] },
  })),
});
const logger = createLogger('silent');
const metrics = new Metrics(config.services.map((s) => s.slug));
const sets = config.services.map((service) => createReplicaSet(service, { logger, events: metrics }));

// A realistic spread of counters: every service with several statuses and TTFBs in many buckets.
for (const { slug } of config.services) {
  for (let i = 0; i < 5000; i++) {
    metrics.requestFinished(slug, i % 50 === 0 ? 503 : 200, i % 50 === 0 ? 'no_replica' : 'ok', 70, 106, (i % 97) / 500, (i % 97) / 400);
  }
}

const source = createStatusSource(sets, metrics);
const board = new StatusBoard({ config, source, logger, relayPort: () => 8080 });
board.close(); // sampled by hand below
for (let i = 0; i < 300; i++) await board.sample(); // a full five-minute ring

function perCall(name: string, fn: () => unknown): void {
  for (let i = 0; i < 200; i++) fn(); // warm-up
  let calls = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < MS) {
    fn();
    calls += 1;
  }
  const cpu = process.cpuUsage(cpu0);
  console.log(`${name.padEnd(44)} ${(((cpu.user + cpu.system) / calls)).toFixed(1).padStart(8)} µs CPU per call (${calls} calls)`);
}

async function perAsyncCall(name: string, fn: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 50; i++) await fn();
  let calls = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < MS) {
    await fn();
    calls += 1;
  }
  const cpu = process.cpuUsage(cpu0);
  console.log(`${name.padEnd(44)} ${(((cpu.user + cpu.system) / calls)).toFixed(1).padStart(8)} µs CPU per call (${calls} calls)`);
}

console.log(`${SERVICES} services, ${MS} ms per figure, node ${process.version}`);
perCall('GET /status body (status + JSON.stringify)', () => JSON.stringify(board.status('127.0.0.1:9091')));
perCall('event-stream tick (status + points + JSON)', () => JSON.stringify({ ...board.status('127.0.0.1:9091'), points: board.latest() }));
perCall('event-stream history (first event of a page)', () => JSON.stringify(board.history()));
await perAsyncCall('sample (counters read, once a second)', () => board.sample());
await Promise.all(sets.map((set) => set.close()));
