// Cold start across several gateways on Kubernetes replicas, against the test suite's fake API
// server and controller simulator (no cluster runs here): N `sluice serve` processes (production
// timings) front one cold service (Deployment at 0); a burst of requests is spread over them. Per
// round, in ms from the burst's start: when `spec.replicas` was raised, when the pod's process
// started, when its health check first answered (the simulator polls every 10 ms), when the first
// answer's first byte and the last answer's end reached the callers; and how many pods and scale
// writes the burst caused. first byte − pod ready is what Sluice adds after the pod is up (its own
// readyPath probe runs every 200 ms by default).
//
//   node dist/bench/kube-cold-start.js [--rounds 5] [--gateways 3] [--burst 30]
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { KubeControllerSim } from '../test/fixtures/kube-controller-sim.js';
import { AUTH, TEST_TOKEN_SHA256 } from '../test/helpers/gateway.js';
import { NS, startFakeKube, writeKubeconfig } from '../test/helpers/kube.js';
import { startCliGateway, type CliGateway } from '../test/helpers/workers.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '5' }, gateways: { type: 'string', default: '3' }, burst: { type: 'string', default: '30' } },
});
const rounds = Number(values.rounds);
const gatewayCount = Number(values.gateways);
const burst = Number(values.burst);

interface Round {
  scaledMs: number;
  podStartMs: number;
  podReadyMs: number;
  firstByteMs: number;
  lastEndMs: number;
  pods: number;
  scaleWrites: number;
  conflicts: number;
  statuses: number[];
}

async function round(): Promise<Round> {
  const api = await startFakeKube();
  api.addDeployment(NS, 'llama', 0);
  const sim = new KubeControllerSim(api, { namespace: NS, deployment: 'llama', service: 'llama', healthEveryMs: 10 });
  let scaledAt = NaN;
  api.onScale((_ns, _name, replicas) => {
    if (replicas > 0 && Number.isNaN(scaledAt)) scaledAt = performance.now();
  });
  const kubeconfig = writeKubeconfig(api.url);
  const config = {
    workers: 1,
    log: { level: 'info' },
    services: [
      {
        slug: 'llama',
        tokens: [{ name: 'bench', sha256: TEST_TOKEN_SHA256 }],
        queue: { maxWaitMs: 30_000 },
        replicas: { kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig }, readyPath: '/health', max: 2 },
      },
    ],
  };
  const env = {};
  const gateways: CliGateway[] = await Promise.all(Array.from({ length: gatewayCount }, () => startCliGateway(config, env)));
  try {
    // Let every gateway's watch list the (empty) slices first.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 5 });
    const started = performance.now();
    let firstByte = Infinity;
    const statuses = await Promise.all(
      Array.from({ length: burst }, async (_, i) => {
        const res = await fetch(gateways[i % gatewayCount]!.url('/v1/chat/completions', 'llama'), {
          method: 'POST',
          headers: { ...AUTH, 'content-type': 'application/json' },
          body,
        });
        const reader = res.body!.getReader();
        const first = await reader.read();
        if (!first.done) firstByte = Math.min(firstByte, performance.now() - started);
        while (!(await reader.read()).done);
        return res.status;
      }),
    );
    const lastEnd = performance.now() - started;
    const pod = sim.started[0];
    const writes = api.requests.filter((r) => r.verb === 'patch' && r.resource.includes('scale'));
    return {
      scaledMs: scaledAt - started,
      podStartMs: pod === undefined ? NaN : pod.startedAt - started,
      podReadyMs: pod?.readyAt === undefined ? NaN : pod.readyAt - started,
      firstByteMs: firstByte,
      lastEndMs: lastEnd,
      pods: sim.started.length,
      scaleWrites: writes.filter((r) => r.status === 200).length,
      conflicts: writes.filter((r) => r.status === 409).length,
      statuses: [...new Set(statuses)],
    };
  } finally {
    for (const g of gateways) g.child.kill('SIGTERM');
    await Promise.all(gateways.map((g) => g.exited));
    await sim.close();
    await api.close();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const results: Round[] = [];
const fmt = (ms: number): string => ms.toFixed(1);
for (let i = 0; i < rounds; i++) {
  const r = await round();
  results.push(r);
  process.stdout.write(
    `round ${i + 1}: scaled ${fmt(r.scaledMs)}, pod started ${fmt(r.podStartMs)}, pod ready ${fmt(r.podReadyMs)}, first byte ${fmt(r.firstByteMs)}, ` +
      `last answer ${fmt(r.lastEndMs)} ms; pods ${r.pods}, scale writes ${r.scaleWrites} (+${r.conflicts} conflicts), statuses ${r.statuses.join(',')}\n`,
  );
}
const med = (pick: (r: Round) => number): string => fmt(median(results.map(pick)));
process.stdout.write(
  `median of ${rounds} (${gatewayCount} gateways, ${burst} requests), ms from the burst's start: scaled ${med((r) => r.scaledMs)}, ` +
    `pod started ${med((r) => r.podStartMs)}, pod ready ${med((r) => r.podReadyMs)}, first byte ${med((r) => r.firstByteMs)} ` +
    `(${med((r) => r.firstByteMs - r.podReadyMs)} after the pod was ready), last answer ${med((r) => r.lastEndMs)}; ` +
    `pods per round ${results.map((r) => r.pods).join(',')}, successful scale writes per round ${results.map((r) => r.scaleWrites).join(',')}\n`,
);
