// Limits per caller shared by several gateways on one Redis (docs/architecture.md#the-shared-store):
// N `sluice serve` processes naming one redis-server (Debian's, started here on a free port), T
// tokens each limited to L requests a minute; each token first sends a burst of L + 10 % at once,
// then twice its limit, paced, for D seconds, its requests spread round-robin over the gateways;
// the replica answers at once. With --gateways 1 and no store (--local) the same load measures the
// in-process limiter.
//
// Per token: admitted against what GCRA allows over the run (L + elapsed × L / 60; the load
// never drops below the limit, so a shortfall is refusals while there was room: false 429s), and
// the worst window: the most the admitted requests (by when their answers came) of any interval
// exceed GCRA's envelope for it (L + length × L / 60 s): the overshoot, against the contract's
// bound max(1, 5 % of L). In all: 503s (a wait for the lease over 50 ms: onStoreDown refuse) and
// Jain's fairness of the admitted counts among the equally limited tokens.
//
// --restart kills Redis halfway and starts it again 2 s later; --on-down allow|refuse (refuse by
// default, so that a request that waited past 50 ms shows as a 503). Also printed: requests that
// failed (no answer) and the paced requests' response times.
//
//   npm run -s build && node dist/bench/limits-shared.js [--gateways 3] [--tokens 20] [--limit 600] [--seconds 60] [--local] [--restart] [--on-down allow]
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { sha256Hex } from '../src/cli/token.js';
import { startRedis, type TestRedis } from '../test/helpers/redis.js';
import { startCliGateway, type CliGateway } from '../test/helpers/workers.js';

const { values } = parseArgs({
  options: {
    gateways: { type: 'string', default: '3' },
    tokens: { type: 'string', default: '20' },
    limit: { type: 'string', default: '600' },
    seconds: { type: 'string', default: '60' },
    local: { type: 'boolean', default: false },
    restart: { type: 'boolean', default: false },
    'on-down': { type: 'string', default: 'refuse' },
  },
});
const gatewayCount = Number(values.gateways);
const tokenCount = Number(values.tokens);
const limit = Number(values.limit);
const seconds = Number(values.seconds);

interface Sent {
  at: number;
  done: number;
  status: number;
}

const secrets = Array.from({ length: tokenCount }, (_, i) => `slc_bench_limits_shared_${String(i).padStart(4, '0')}_xxxxxxxxxxxxxxxxxxxx`);

async function main(): Promise<void> {
  const replica = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{}'));
  });
  await new Promise<void>((resolve) => replica.listen(0, '127.0.0.1', resolve));
  const replicaUrl = `http://127.0.0.1:${(replica.address() as { port: number }).port}`;
  const redis: TestRedis | undefined = values.local ? undefined : await startRedis();
  const config = {
    workers: 1,
    log: { level: 'info' },
    ...(redis === undefined ? {} : { limits: { store: redis.url, onStoreDown: values['on-down'] } }),
    services: [
      {
        slug: 'svc',
        tokens: secrets.map((s, i) => ({ name: `t${i}`, sha256: sha256Hex(s), limits: { requestsPerMinute: limit } })),
        replicas: { urls: [replicaUrl] },
      },
    ],
  };
  const gateways: CliGateway[] = [];
  try {
    for (let g = 0; g < gatewayCount; g++) gateways.push(await startCliGateway(config));
    const pools = gateways.map((gw) => new Pool(gw.origin, { connections: 16 }));
    const sent: Sent[][] = secrets.map(() => []);
    const intervalMs = 60_000 / limit / 2; // twice the limit
    const start = performance.now();
    const end = start + seconds * 1000;
    let next = 0;
    // --restart: Redis is killed halfway and started again 2 s later (empty: no persistence).
    const restarted =
      values.restart && redis !== undefined
        ? (async () => {
            await new Promise((resolve) => setTimeout(resolve, (seconds * 1000) / 2));
            await redis.stop();
            await new Promise((resolve) => setTimeout(resolve, 2000));
            await redis.start();
          })()
        : Promise.resolve();
    let failed = 0;
    /** When the last burst's answers came: response times count from then on. */
    let burstDone = 0;
    await Promise.all(
      secrets.map(async (secret, t) => {
        const pending: Promise<void>[] = [];
        const send = (): void => {
          const at = performance.now();
          const pool = pools[next++ % pools.length]!;
          pending.push(
            pool
              .request({ path: '/api/v1/services/svc/request/x', method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: '{}' })
              .then(async (res) => {
                await res.body.dump();
                sent[t]!.push({ at, done: performance.now(), status: res.statusCode });
              })
              .catch(() => {
                failed++;
              }),
          );
        };
        for (let i = 0; i < Math.ceil(limit * 1.1); i++) send();
        void Promise.all(pending.slice()).then(() => {
          burstDone = Math.max(burstDone, performance.now());
        });
        // Then each token at its own offset within one interval, keeping its pace.
        let due = performance.now() + (t * intervalMs) / tokenCount;
        while (due < end) {
          const wait = due - performance.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          send();
          due += intervalMs;
        }
        await Promise.all(pending);
      }),
    );
    await restarted;
    for (const pool of pools) await pool.close();
    report(sent, (performance.now() - start) / 1000, failed, burstDone);
  } finally {
    for (const gw of gateways) if (gw.child.exitCode === null) gw.child.kill('SIGTERM');
    await Promise.all(gateways.map((gw) => gw.exited));
    await redis?.close();
    replica.close();
  }
}

function report(sent: Sent[][], elapsedS: number, failed: number, burstDone: number): void {
  const T = 60_000 / limit;
  const bound = Math.max(1, Math.floor(limit * 0.05));
  const allowed = limit + Math.floor((elapsedS * limit) / 60);
  const admitted: number[] = [];
  const windowExcess: number[] = [];
  let unavailable = 0;
  let false429 = 0;
  for (const list of sent) {
    const times = list.filter((r) => r.status === 200).map((r) => r.done).sort((a, b) => a - b);
    unavailable += list.filter((r) => r.status === 503).length;
    admitted.push(times.length);
    false429 += Math.max(0, allowed - times.length);
    let worst = 0;
    for (let i = 0; i < times.length; i++) {
      for (let j = i + limit; j < times.length; j++) worst = Math.max(worst, j - i + 1 - (limit + Math.floor((times[j]! - times[i]!) / T)));
    }
    windowExcess.push(worst);
  }
  const total = admitted.reduce((a, b) => a + b, 0);
  const squares = admitted.reduce((a, b) => a + b * b, 0);
  const sorted = (xs: number[]): number[] => xs.slice().sort((a, b) => a - b);
  console.log(
    JSON.stringify(
      {
        gateways: gatewayCount,
        store: values.local ? 'in-process' : 'redis',
        tokens: tokenCount,
        limitPerMinute: limit,
        seconds: Math.round(elapsedS),
        requests: sent.reduce((a, l) => a + l.length, 0),
        admittedPerToken: { min: sorted(admitted)[0], median: sorted(admitted)[admitted.length >> 1], max: sorted(admitted).at(-1), gcraAllows: allowed },
        worstWindowOvershoot: { median: sorted(windowExcess)[windowExcess.length >> 1], max: sorted(windowExcess).at(-1), bound },
        false429,
        unavailable503: unavailable,
        failedRequests: failed,
        // What the requests sent after the burst's answers took: a wait on the store shows here.
        pacedResponseMs: latencies(sent, burstDone),
        jainFairness: Number(((total * total) / (admitted.length * squares)).toFixed(4)),
      },
      null,
      2,
    ),
  );
}

function latencies(sent: Sent[][], from: number): { p50: number; p99: number; max: number } {
  const ms = sent.flatMap((list) => list.filter((r) => r.at > from).map((r) => r.done - r.at)).sort((a, b) => a - b);
  const at = (q: number): number => Number((ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? 0).toFixed(1));
  return { p50: at(0.5), p99: at(0.99), max: at(1) };
}

await main();
