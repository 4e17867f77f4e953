// `npm run bench:pauses` (or `node dist/bench/pauses.js` after a build): where the tail of
// time to first byte comes from. Runs the TTFB scenario (one request at a time, 1 KiB JSON each
// way) against the replica alone, through Sluice (log level info, the inference options on, as
// `npm run bench`, its access log to a file) and through nginx when it is installed (never
// installed from here; the reference for the tail a relay hop adds on this machine), interleaved
// in blocks, with the Node processes recording their garbage collections and event loop delay
// (lib/pause-recorder.ts). Then, for the requests slower than the p99 of their peer: how many
// overlapped a collection in the gateway, the replica or this client, and how many nothing
// explains (scheduling: three processes on the machine's cores).
// Settings:
//   BENCH_PAUSES_REQUESTS  measured requests per peer (default 20000), in blocks of 1000
//   BENCH_LOG_LEVEL        the gateway's log level (default info)
//   BENCH_OPTIONS          on (default) | off: the gateway's inference options (see gateway.ts)
//   BENCH_GATEWAY_EXECARGV Node flags for the gateway, e.g. "--max-semi-space-size=32"
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Dispatcher, Pool } from 'undici';
import { type Child, installCleanup, startChild } from './lib/children.js';
import { type Target, type Timed, timedRequest } from './lib/client.js';
import { type GcPause, PauseRecorder, type Pauses } from './lib/pause-recorder.js';
import { sluiceTarget, startSluice } from './lib/peers.js';
import { startNginx } from './lib/nginx.js';
import { choiceEnv, intEnv } from './lib/settings.js';
import { ensureSystemPeer } from './lib/system-peers.js';
import { percentile } from './lib/stats.js';
import { INFER_PATH, INFER_REQUEST } from './lib/workload.js';

const requests = intEnv('BENCH_PAUSES_REQUESTS', 20_000, 1_000, 10_000_000);
const logLevel = choiceEnv('BENCH_LOG_LEVEL', 'info', ['warn', 'info'] as const);
const options = choiceEnv('BENCH_OPTIONS', 'on', ['on', 'off'] as const);
const BLOCK = 1_000;
const PEERS = ['direct', 'sluice', 'nginx'] as const;
type PeerName = (typeof PEERS)[number];
const plain = (port: number): Target => ({ origin: `http://127.0.0.1:${port}`, prefix: '', headers: {} });

type Sample = Pick<Timed, 'startUs' | 'ttfbUs'>;

const dispatchOptions = (t: Target): Dispatcher.DispatchOptions => ({
  method: 'POST',
  path: t.prefix + INFER_PATH,
  headers: { ...t.headers, 'content-type': 'application/json' },
  body: INFER_REQUEST,
});

const overlaps = (s: Sample, pauses: readonly GcPause[]): GcPause | undefined =>
  pauses.find((p) => p.startUs < s.startUs + s.ttfbUs && p.startUs + p.durationUs > s.startUs);

function gcLine(name: string, p: Pauses, count: number): string {
  const byKind = new Map<string, { n: number; us: number[] }>();
  for (const g of p.gc) {
    const k = byKind.get(g.kind) ?? { n: 0, us: [] };
    k.n += 1;
    k.us.push(g.durationUs);
    byKind.set(g.kind, k);
  }
  const kinds = [...byKind].map(([kind, k]) => `${kind} ${k.n} (p50 ${percentile(k.us, 50).toFixed(0)} µs, max ${Math.max(...k.us).toFixed(0)} µs)`).join(', ');
  return (
    `  ${name.padEnd(8)} ${(p.gc.length / (count / 1000)).toFixed(1)} collections per 1,000 requests: ${kinds || 'none'}; ` +
    `event loop delay p50 ${(p.loopDelayP50Us / 1000).toFixed(2)} ms, p99 ${(p.loopDelayP99Us / 1000).toFixed(2)} ms, max ${(p.loopDelayMaxUs / 1000).toFixed(2)} ms`
  );
}

async function main(): Promise<void> {
  installCleanup();
  const dir = tmpdir();
  const file = (name: string): string => join(dir, `sluice-bench-pauses-${process.pid}-${name}.json`);
  const children: Child[] = [];
  const client = new PauseRecorder();
  try {
    const replica = await startChild('replica', new URL('./replica.js', import.meta.url), { env: { BENCH_PAUSES_FILE: file('replica') } });
    children.push(replica);
    const gateway = await startSluice('sluice-pauses', {
      BENCH_REPLICA_URL: `http://127.0.0.1:${replica.port}`,
      BENCH_LOG_LEVEL: logLevel,
      BENCH_WORKERS: '1',
      BENCH_OPTIONS: options,
      BENCH_PAUSES_FILE: file('gateway'),
    });
    const flags = process.env['BENCH_GATEWAY_EXECARGV'] ?? '';
    children.push(gateway);
    const targets: Partial<Record<PeerName, Target>> = { direct: plain(replica.port), sluice: sluiceTarget(gateway.port, options === 'on') };
    const nginx = ensureSystemPeer('nginx', false, () => {});
    if (nginx.path !== undefined) {
      const relay = await startNginx(nginx.path, replica.port);
      children.push(relay);
      targets.nginx = plain(relay.port);
    }
    const peers = PEERS.filter((p) => targets[p] !== undefined);
    const pools = new Map(peers.map((p) => [p, new Pool(targets[p]!.origin, { connections: 1 })]));
    const samples = new Map<PeerName, Sample[]>(peers.map((p) => [p, []]));
    process.stderr.write(`pauses: ${requests} requests per peer, one at a time, in blocks of ${BLOCK} (gateway: log level ${logLevel}, options ${options}${flags === '' ? '' : `, ${flags}`})\n`);
    for (const peer of peers) for (let i = 0; i < 2_000; i++) await timedRequest(pools.get(peer)!, dispatchOptions(targets[peer]!));
    process.kill(replica.pid, 'SIGUSR2');
    process.kill(gateway.pid, 'SIGUSR2');
    client.reset();
    for (let done = 0; done < requests; done += BLOCK) {
      for (const peer of peers) {
        const o = dispatchOptions(targets[peer]!);
        for (let i = 0; i < BLOCK; i++) samples.get(peer)!.push(await timedRequest(pools.get(peer)!, o));
      }
    }
    await Promise.all([...pools.values()].map((p) => p.close()));
    const clientPauses = client.stop();
    await Promise.all(children.map((c) => c.stop(15_000)));
    children.length = 0;
    const read = (name: string): Pauses => JSON.parse(readFileSync(file(name), 'utf8')) as Pauses;
    const pauses = { gateway: read('gateway'), replica: read('replica'), client: clientPauses };
    const out: string[] = [];
    for (const peer of peers) {
      const s = samples.get(peer)!;
      const ttfb = s.map((x) => x.ttfbUs);
      const p99 = percentile(ttfb, 99);
      const slow = s.filter((x) => x.ttfbUs > p99);
      const count = { gateway: 0, replica: 0, client: 0, none: 0 };
      const gcUs: number[] = [];
      for (const x of slow) {
        const g = peer === 'sluice' ? overlaps(x, pauses.gateway.gc) : undefined;
        if (g !== undefined) {
          count.gateway += 1;
          gcUs.push(g.durationUs);
        } else if (overlaps(x, pauses.replica.gc) !== undefined) count.replica += 1;
        else if (overlaps(x, pauses.client.gc) !== undefined) count.client += 1;
        else count.none += 1;
      }
      out.push(
        `${peer}: TTFB p50 ${percentile(ttfb, 50).toFixed(0)} µs, p90 ${percentile(ttfb, 90).toFixed(0)}, p99 ${p99.toFixed(0)}, p99.9 ${percentile(ttfb, 99.9).toFixed(0)}, max ${Math.max(...ttfb).toFixed(0)}`,
        `  the ${slow.length} requests above p99 overlapped a collection in: ${peer === 'sluice' ? `the gateway ${count.gateway}${gcUs.length > 0 ? ` (p50 ${percentile(gcUs, 50).toFixed(0)} µs)` : ''}, ` : ''}the replica ${count.replica}, the client ${count.client}; none ${count.none}`,
      );
    }
    out.push('collections during the measured requests (every peer):');
    out.push(gcLine('gateway', pauses.gateway, requests), gcLine('replica', pauses.replica, requests * peers.length), gcLine('client', pauses.client, requests * peers.length));
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    await Promise.all(children.map((c) => c.stop(15_000)));
    for (const name of ['gateway', 'replica']) rmSync(file(name), { force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`pauses: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
