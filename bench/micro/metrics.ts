// `node dist/bench/micro/metrics.js`: µs per request for the per-request metrics.
// `Metrics` (src/metrics/) counting into typed arrays, next to prom-client used per request the
// way the first build did (labelled children looked up once, then inc/observe per request), and
// the cost of one /metrics render.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Metrics } from '../../src/metrics/metrics.js';
import { LATENCY_BUCKETS } from '../../src/metrics/request-counters.js';
import { report, time } from './timing.js';

const N = Number(process.env['MICRO_N'] ?? 50_000);
const OUTCOMES = ['ok', 'ok', 'ok', 'client_closed'];
const STATUSES = [200, 200, 404, 200];

/** prom-client per request, as src/metrics.ts did before the typed arrays. */
function promClientPerRequest(): (i: number) => void {
  const registers = [new Registry()];
  const requests = new Counter({ name: 'r', help: 'r', labelNames: ['service', 'status', 'outcome'], registers });
  const ttfb = new Histogram({ name: 't', help: 't', labelNames: ['service'], buckets: [...LATENCY_BUCKETS], registers });
  const duration = new Histogram({ name: 'd', help: 'd', labelNames: ['service'], buckets: [...LATENCY_BUCKETS], registers });
  const bytes = new Counter({ name: 'b', help: 'b', labelNames: ['service', 'direction'], registers });
  const inflight = new Gauge({ name: 'i', help: 'i', registers });
  const children = new Map<number, Counter.Internal>();
  const t = ttfb.labels('svc');
  const d = duration.labels('svc');
  const bytesIn = bytes.labels('svc', 'in');
  const bytesOut = bytes.labels('svc', 'out');
  return (i) => {
    inflight.inc();
    inflight.dec();
    const status = STATUSES[i & 3]!;
    const key = status * 64 + (i & 3 ? 0 : 1);
    let child = children.get(key);
    if (child === undefined) {
      child = requests.labels('svc', String(status), OUTCOMES[i & 3]!);
      children.set(key, child);
    }
    child.inc();
    t.observe(0.0004 + (i & 7) / 1e4);
    d.observe(0.0005 + (i & 7) / 1e4);
    bytesIn.inc(70);
    bytesOut.inc(106);
  };
}

async function main(): Promise<void> {
  const metrics = new Metrics(['a', 'svc', 'c']);
  const typed = (i: number): void => {
    metrics.requestStarted();
    metrics.requestFinished('svc', STATUSES[i & 3]!, OUTCOMES[i & 3]!, 70, 106, 0.0004 + (i & 7) / 1e4, 0.0005 + (i & 7) / 1e4);
  };
  const timings = [await time('prom-client per request (before)', N, promClientPerRequest()), await time('Metrics: typed arrays (after)', N, typed)];
  timings.push(
    await time('/metrics render, synchronous part (3 services)', 200, () => {
      void metrics.render();
    }),
  );
  report(timings);
}

void main();
