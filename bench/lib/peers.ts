// The peers: the replica alone (`direct`) and each relay in front of it, every one its own process.
import { closeSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { atExit, type Child, startChild } from './children.js';
import type { Target } from './client.js';
import type { PeerId } from './modes.js';
import { startCaddy } from './caddy.js';
import { startHaproxy } from './haproxy.js';
import { startNginx } from './nginx.js';
import type { SystemPeerId } from './system-peers.js';
import { BENCH_ROUTER_SLUG, BENCH_SLUG, BENCH_TOKEN, SESSION_HEADER } from './workload.js';
import { startRedis, type TestRedis } from '../../test/helpers/redis.js';

export const LABEL: Record<PeerId, string> = {
  direct: 'direct (no relay)',
  'sluice-info': 'Sluice info',
  'sluice-info-plain': 'Sluice info, options off',
  'sluice-warn': 'Sluice warn',
  'sluice-info-w2': 'Sluice info, workers: 2',
  nginx: 'nginx (1 worker)',
  haproxy: 'HAProxy (1 thread)',
  caddy: 'Caddy (GOMAXPROCS=1)',
  'http-proxy': 'http-proxy',
  'fastify-proxy': '@fastify/http-proxy',
  bare: 'bare uWS + net.Socket (the floor)',
  'sluice-other': 'Sluice info, other build',
  'sluice-limits': 'Sluice info, limits in-process',
  'sluice-limits-redis': 'Sluice info, limits in Redis',
  'sluice-router': 'Sluice info, through a router',
  'sluice-other-limits': 'Sluice info, limits in-process, other build',
  'sluice-other-limits-redis': 'Sluice info, limits in Redis, other build',
  'sluice-other-router': 'Sluice info, through a router, other build',
  'sluice-trace-1pct': 'Sluice info, tracing 1 %',
  'sluice-trace-all': 'Sluice info, tracing 100 %',
  'sluice-other-trace-all': 'Sluice info, tracing 100 %, other build',
};

export interface Peer {
  id: PeerId;
  label: string;
  target: Target;
  /** The relay's process (CPU and memory are read from it); undefined for direct. */
  relay: Child | undefined;
}

const script = (name: string): URL => new URL(`../${name}.js`, import.meta.url);

/** The `dist/src` of the build BENCH_OTHER_GATEWAY names (its `dist/bench/gateway.js`). */
function otherSrc(id: string): string {
  const other = process.env['BENCH_OTHER_GATEWAY'] ?? '';
  if (other === '') throw new Error(`${id}: set BENCH_OTHER_GATEWAY to the dist/bench/gateway.js of another build`);
  return resolve(dirname(resolve(other)), '../src');
}
const plain = (port: number): Target => ({ origin: `http://127.0.0.1:${port}`, prefix: '', headers: {} });

/** A Sluice peer; `withOptions`: its clients send the session header its affinity reads (gateway.ts); `slug`: the service or router they call. */
export const sluiceTarget = (port: number, withOptions = true, slug = BENCH_SLUG): Target => ({
  origin: `http://127.0.0.1:${port}`,
  prefix: `/api/v1/services/${slug}/request`,
  headers: withOptions ? { authorization: `Bearer ${BENCH_TOKEN}`, [SESSION_HEADER]: 'bench-session' } : { authorization: `Bearer ${BENCH_TOKEN}` },
});

/**
 * Starts a Sluice gateway child whose logs (pino, fd 1) go to a temporary file, as in production
 * — so the `info` peers pay for writing every access-log line.
 */
export async function startSluice(name: string, env: Record<string, string>, gateway = script('gateway')): Promise<Child> {
  const logFile = join(tmpdir(), `sluice-bench-${process.pid}-${name}.log`);
  const fd = openSync(logFile, 'w');
  atExit(() => rmSync(logFile, { force: true }));
  try {
    // BENCH_GATEWAY_EXECARGV: Node flags for every Sluice process of the run, e.g.
    // "--cpu-prof --cpu-prof-dir=/tmp/p" to profile the cold-start scenario (NODE_OPTIONS refuses --cpu-prof).
    const execArgv = (process.env['BENCH_GATEWAY_EXECARGV'] ?? '').split(' ').filter((a) => a !== '');
    return await startChild(name, gateway, { env, stdout: fd, execArgv });
  } finally {
    closeSync(fd);
  }
}

/** Where each system peer's program is (those found or installed). */
export type SystemBinaries = Partial<Record<SystemPeerId, string>>;

/** The redis-servers the limited peers use; a live one would keep the run from ending. */
const stores: TestRedis[] = [];

/** The OTLP sink the traced peers export to (one per run, started by the first of them). */
let sink: Promise<Child> | undefined;

/** Stops the peers' redis-servers and the OTLP sink (the run's end, after the peers themselves). */
export async function closePeerStores(): Promise<void> {
  await Promise.all(stores.splice(0).map((r) => r.close()));
  const started = sink;
  sink = undefined;
  if (started !== undefined) await (await started).stop();
}

/** Starts one peer in front of the replica. */
export async function startPeer(id: PeerId, replica: Child, binaries: SystemBinaries): Promise<Peer> {
  const replicaUrl = `http://127.0.0.1:${replica.port}`;
  const peer = (relay: Child | undefined, target: Target): Peer => ({ id, label: LABEL[id], target, relay });
  switch (id) {
    case 'direct':
      return peer(undefined, plain(replica.port));
    case 'sluice-info':
    case 'sluice-info-plain':
    case 'sluice-warn':
    case 'sluice-info-w2': {
      const plainOptions = id === 'sluice-info-plain';
      const relay = await startSluice(id, {
        BENCH_REPLICA_URL: replicaUrl,
        BENCH_LOG_LEVEL: id === 'sluice-warn' ? 'warn' : 'info',
        BENCH_WORKERS: id === 'sluice-info-w2' ? '2' : '1',
        BENCH_OPTIONS: plainOptions ? 'off' : 'on',
      });
      return peer(relay, sluiceTarget(relay.port, !plainOptions));
    }
    case 'sluice-other': {
      // Sluice info as another build runs it (its dist/bench/gateway.js): before and after a change, in one run.
      const other = process.env['BENCH_OTHER_GATEWAY'] ?? '';
      if (other === '') throw new Error('sluice-other: set BENCH_OTHER_GATEWAY to the dist/bench/gateway.js of another build');
      const relay = await startSluice(id, { BENCH_REPLICA_URL: replicaUrl, BENCH_LOG_LEVEL: 'info', BENCH_WORKERS: '1', BENCH_OPTIONS: 'on' }, pathToFileURL(resolve(other)));
      return peer(relay, sluiceTarget(relay.port));
    }
    case 'sluice-limits':
    case 'sluice-limits-redis':
    case 'sluice-router':
    case 'sluice-other-limits':
    case 'sluice-other-limits-redis':
    case 'sluice-other-router': {
      // The bench token limited (never reached): in-process, or in a redis-server of this run's own;
      // or the clients go through a router. `sluice-other-…`: the same config on the other build.
      let limits = 'off';
      if (id.endsWith('-limits')) limits = 'local';
      if (id.endsWith('-limits-redis')) {
        const redis = await startRedis();
        stores.push(redis);
        limits = redis.url;
      }
      const router = id.endsWith('-router');
      const env: Record<string, string> = { BENCH_REPLICA_URL: replicaUrl, BENCH_LOG_LEVEL: 'info', BENCH_WORKERS: '1', BENCH_OPTIONS: 'on', BENCH_LIMITS: limits, BENCH_ROUTER: router ? 'on' : 'off' };
      if (id.startsWith('sluice-other-')) env['BENCH_SLUICE_SRC'] = otherSrc(id);
      const relay = await startSluice(id, env);
      return peer(relay, sluiceTarget(relay.port, true, router ? BENCH_ROUTER_SLUG : BENCH_SLUG));
    }
    case 'sluice-trace-1pct':
    case 'sluice-trace-all':
    case 'sluice-other-trace-all': {
      // Sluice info with tracing on (gateway.ts BENCH_TRACING), exporting to this run's sink.
      sink ??= startChild('otlp-sink', script('otlp-sink'));
      const collector = await sink;
      const relay = await startSluice(id, {
        BENCH_REPLICA_URL: replicaUrl,
        BENCH_LOG_LEVEL: 'info',
        BENCH_WORKERS: '1',
        BENCH_OPTIONS: 'on',
        BENCH_TRACING: `http://127.0.0.1:${collector.port}/v1/traces`,
        BENCH_TRACE_RATIO: id === 'sluice-trace-1pct' ? '0.01' : '1',
        ...(id === 'sluice-other-trace-all' ? { BENCH_SLUICE_SRC: otherSrc(id) } : {}),
      });
      return peer(relay, sluiceTarget(relay.port));
    }
    case 'nginx':
    case 'haproxy':
    case 'caddy': {
      const binary = binaries[id];
      if (binary === undefined) throw new Error(`${id}: no binary`);
      const start = id === 'nginx' ? startNginx : id === 'haproxy' ? startHaproxy : startCaddy;
      const relay = await start(binary, replica.port);
      return peer(relay, plain(relay.port));
    }
    case 'http-proxy':
    case 'fastify-proxy':
    case 'bare': {
      const file = id === 'http-proxy' ? 'http-proxy-relay' : id === 'fastify-proxy' ? 'fastify-relay' : 'bare-relay';
      const relay = await startChild(id, script(file), { env: { BENCH_REPLICA_URL: replicaUrl } });
      return peer(relay, plain(relay.port));
    }
  }
}

/** Round r's order: every peer once, starting one further along each round. */
export function order<T>(peers: readonly T[], round: number): T[] {
  const k = round % peers.length;
  return [...peers.slice(k), ...peers.slice(0, k)];
}
