// What /status and /metrics say of a replica's load reading (`replicas.load`) when it fails: the
// latest failure, not the first of the run (logged once all the same), and a `waiting` metric whose
// series sum past the largest number is no reading (never `+Inf`). A replica whose /metrics text
// the test sets, the real gateway with its admin listener.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { metricSamples, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';

/** What the replica's GET /metrics answers: `status` and `text`. */
const endpoint = { status: 200, text: '' };
let replica: Server;
let tg: TestGateway;

const WAITING = 'vllm:num_requests_waiting';
const samples = (...values: string[]): string => values.map((v, i) => `${WAITING}{engine="${i}"} ${v}\n`).join('');

before(async () => {
  replica = createServer((req, res) => {
    if (req.url === '/metrics') res.writeHead(endpoint.status, { 'content-type': 'text/plain' }).end(endpoint.text);
    else res.end('ok');
  });
  await new Promise<void>((resolve) => replica.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(replica.address() as AddressInfo).port}`;
  tg = await startTestGateway(rawService({ urls: [url], load: { preset: 'vllm', intervalMs: 100 } }), { workers: 1, admin: { host: '127.0.0.1', port: 0 } });
});

after(async () => {
  await tg.close();
  replica.closeAllConnections();
  await new Promise((resolve) => replica.close(resolve));
});

interface Load {
  replica: string;
  waiting: number | null;
  used: boolean;
  problem: string | null;
}

async function load(): Promise<Load> {
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort}/status`)).json()) as { services: { loads: Load[] }[] };
  return status.services[0]!.loads[0]!;
}

/** Waits until /status shows a reading with `want` (a partial match), and returns it. */
async function loadWhere(want: Partial<Load>): Promise<Load> {
  let last: Load | undefined;
  await eventually(
    async () => {
      last = await load().catch(() => undefined);
      return last !== undefined && Object.entries(want).every(([k, v]) => last![k as keyof Load] === v);
    },
    10_000,
    `a load reading ${JSON.stringify(want)}`,
  ).catch((err: Error) => {
    throw new Error(`${err.message} (last: ${JSON.stringify(last)})`);
  });
  return last!;
}

/** The admin listener's /metrics text (the operations endpoints are there when it is configured). */
const metricsText = async (): Promise<string> => (await fetch(`http://127.0.0.1:${tg.gateway.adminPort}/metrics`)).text();
const waitingSample = async (): Promise<number | undefined> => metricSamples(await metricsText()).get('sluice_replica_waiting{service="svc",replica="svc-1"}');

const failuresLogged = (): number => tg.logs.filter((l) => String(l.msg).startsWith('load reading failed')).length;

test('/status shows the latest failure of a reading, while the failure is logged once', async () => {
  endpoint.text = samples('3');
  await loadWhere({ waiting: 3, used: true, problem: null });
  endpoint.status = 500;
  await loadWhere({ used: false, problem: 'status 500' });
  endpoint.status = 200;
  endpoint.text = '# no waiting metric here\n';
  await loadWhere({ used: false, problem: `no ${WAITING} sample` });
  assert.equal(failuresLogged(), 1, 'one failure, one log line');
  endpoint.text = samples('2');
  await loadWhere({ waiting: 2, used: true, problem: null });
  const recovered = tg.logs.filter((l) => l.msg === 'load reading recovered');
  assert.deepEqual(recovered.map((l) => l.problem), [`no ${WAITING} sample`], 'the recovery names the failure that ended');
});

test('a waiting sum that overflows is no reading: not published as +Inf, /status says why', async () => {
  endpoint.status = 200;
  endpoint.text = samples('1');
  await loadWhere({ waiting: 1, used: true });
  assert.equal(await waitingSample(), 1);
  const before = failuresLogged();
  // Each sample is finite; their sum is not.
  endpoint.text = samples('1.5e308', '1.5e308');
  await loadWhere({ used: false, problem: `${WAITING} sums past the largest number` });
  assert.equal(await waitingSample(), undefined, 'no sample: the replica is weighed by in flight');
  assert.doesNotMatch(await metricsText(), /^sluice_replica_waiting\S* \+Inf$/m);
  assert.equal(failuresLogged(), before + 1);
  endpoint.text = samples('4');
  await loadWhere({ waiting: 4, used: true, problem: null });
  assert.equal(await waitingSample(), 4);
});
