// Passive outlier detection (docs/operations.md#ejected-replicas): a replica that fails requests
// in a row before its status line is ejected from rotation for a backoff, then returns on
// probation; never more than half of a service's replicas are ejected; /status, the metric and
// the log show it; with worker threads too. The backoff comes from the test hooks
// (SLUICE_TEST_REPLICA_TUNING), so the tests wait for log lines, not for 30 s.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type LoadReplica, startLoadReplica } from '../helpers/load-replica.js';
import { eventually } from '../helpers/wait.js';

process.env['NODE_ENV'] = 'test';
process.env['SLUICE_TEST_HOOKS'] = '1';

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

async function replicas(...names: string[]): Promise<LoadReplica[]> {
  const list = await Promise.all(names.map((name) => startLoadReplica(name)));
  open.push(...list);
  return list;
}

/** A gateway in front of `list` whose first ejection lasts `ejectionBaseMs`, with an admin listener (/status, /metrics). */
async function gateway(list: { url: string }[], ejectionBaseMs: number, workers = 1, service: Record<string, unknown> = {}): Promise<TestGateway> {
  process.env['SLUICE_TEST_REPLICA_TUNING'] = JSON.stringify({ ejectionBaseMs });
  const tg = await startTestGateway(rawService({ urls: list.map((r) => r.url) }, service), { workers, admin: { host: '127.0.0.1', port: 0 } });
  open.push(tg);
  return tg;
}

/** The gateway as seen on its admin listener (for `metric`). */
function admin(tg: TestGateway): TestGateway {
  const adminPort = Number(tg.logs.find((l) => l['msg'] === 'gateway listening')!['adminPort']);
  return { ...tg, origin: `http://127.0.0.1:${adminPort}` };
}

/** One request: its status. */
async function ask(tg: TestGateway): Promise<number> {
  const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: AUTH, body: '{}' });
  await res.body.text();
  return res.statusCode;
}

const lines = (tg: TestGateway, msg: string): Record<string, unknown>[] => tg.logs.filter((l) => l['msg'] === msg);

/** Sequential requests until `done()` (at most `max`); their statuses. */
async function askUntil(tg: TestGateway, done: () => boolean, max: number, what: string): Promise<number[]> {
  const statuses: number[] = [];
  while (!done()) {
    if (statuses.length === max) assert.fail(`${what}: not after ${max} requests`);
    statuses.push(await ask(tg));
  }
  return statuses;
}

interface EjectionView {
  ejected: boolean;
  until: string | null;
  reason: string | null;
  ejections: number;
}

async function ejectionsOnStatus(tg: TestGateway): Promise<Record<string, EjectionView>> {
  const body = (await (await fetch(`${admin(tg).origin}/status`)).json()) as { services: { ejections: (EjectionView & { replica: string })[] }[] };
  return Object.fromEntries(body.services[0]!.ejections.map(({ replica, ...rest }) => [replica, rest]));
}

test('a replica that resets requests is ejected after three in a row, with worker threads: the others take every request; log, metric and /status show it', async () => {
  const [bad, good] = await replicas('bad', 'good');
  bad!.answers = 'reset';
  const tg = await gateway([bad!, good!], 60_000, 2);
  assert.equal(await metric(admin(tg), 'sluice_replica_ejections_total{service="svc",reason="reset"}'), 0, 'the series exists before any ejection');
  const statuses = await askUntil(tg, () => lines(tg, 'replica ejected').length > 0, 60, 'ejection');
  // Three resets in a row eject it (a fourth may reach it while the message of the third is on its
  // way from the worker thread; test 2 counts exactly, on one thread).
  assert.ok(bad!.seen.length >= 3, `${bad!.seen.length} requests reached it`);
  assert.equal(statuses.filter((s) => s === 502).length, bad!.seen.length);
  const [line] = lines(tg, 'replica ejected');
  assert.deepEqual(
    { service: line!['service'], replica: line!['replica'], reason: line!['reason'], backoffMs: line!['backoffMs'], level: line!['level'] },
    { service: 'svc', replica: 'svc-1', reason: 'reset', backoffMs: 60_000, level: 40 },
  );
  // Out of rotation: every request goes to the other replica.
  const reached = bad!.seen.length;
  for (let i = 0; i < 10; i++) assert.equal(await ask(tg), 200);
  assert.equal(bad!.seen.length, reached);
  assert.equal(await metric(admin(tg), 'sluice_replica_ejections_total{service="svc",reason="reset"}'), 1);
  assert.equal(await metric(admin(tg), 'sluice_replica_ejections_total{service="svc",reason="timeout"}'), 0);
  const status = await ejectionsOnStatus(tg);
  assert.deepEqual(Object.keys(status), ['svc-1'], 'only replicas ever ejected are listed');
  assert.equal(status['svc-1']!.ejected, true);
  assert.equal(status['svc-1']!.reason, 'reset');
  assert.equal(status['svc-1']!.ejections, 1);
  assert.ok(Date.parse(status['svc-1']!.until!) > Date.now(), 'until is ahead');
});

test('an ejected replica returns on probation: one failure ejects it again for twice as long; an answer ends probation', async () => {
  const [bad, good] = await replicas('bad', 'good');
  bad!.answers = 'reset';
  const tg = await gateway([bad!, good!], 100);
  await askUntil(tg, () => lines(tg, 'replica ejected').length === 1, 60, 'first ejection');
  assert.equal(bad!.seen.length, 3);
  await eventually(() => lines(tg, 'replica returned from ejection').length === 1, 10_000, 'first return');
  // On probation: its first request fails and ejects it again, with the doubled backoff.
  await askUntil(tg, () => lines(tg, 'replica ejected').length === 2, 60, 'second ejection');
  assert.equal(bad!.seen.length, 4, 'one failure on probation ejects it');
  assert.equal(lines(tg, 'replica ejected')[1]!['backoffMs'], 200);
  // It heals; back from the second ejection, an answer ends its probation.
  bad!.answers = 'ok';
  await eventually(() => lines(tg, 'replica returned from ejection').length === 2, 10_000, 'second return');
  const before = bad!.seen.length;
  await askUntil(tg, () => bad!.seen.length > before, 60, 'a request to the healed replica');
  bad!.answers = 'reset';
  const healed = bad!.seen.length;
  await askUntil(tg, () => lines(tg, 'replica ejected').length === 3, 60, 'third ejection');
  assert.equal(bad!.seen.length - healed, 3, 'off probation, three failures in a row are needed again');
  assert.equal(lines(tg, 'replica ejected')[2]!['backoffMs'], 400, 'the backoff keeps doubling until a healthy spell');
  assert.equal(await metric(admin(tg), 'sluice_replica_ejections_total{service="svc",reason="reset"}'), 3);
  const status = await ejectionsOnStatus(tg);
  assert.equal(status['svc-1']!.ejections, 3);
});

test('never more than half of the replicas are ejected, and a service of one replica never is', async () => {
  const [a, b] = await replicas('a', 'b');
  a!.answers = 'reset';
  b!.answers = 'reset';
  const tg = await gateway([a!, b!], 60_000);
  await askUntil(tg, () => lines(tg, 'replica ejected').length === 1, 60, 'one ejection');
  const ejected = lines(tg, 'replica ejected')[0]!['replica'];
  const other = ejected === 'svc-1' ? b! : a!;
  const seen = other.seen.length;
  for (let i = 0; i < 8; i++) assert.equal(await ask(tg), 502);
  assert.equal(other.seen.length, seen + 8, 'the other replica keeps its place, failing as it is');
  assert.equal(lines(tg, 'replica ejected').length, 1);

  const [alone] = await replicas('alone');
  alone!.answers = 'reset';
  const single = await gateway([alone!], 60_000);
  for (let i = 0; i < 8; i++) assert.equal(await ask(single), 502);
  assert.equal(alone!.seen.length, 8);
  assert.equal(lines(single, 'replica ejected').length, 0);
});

test('a replica that misses its status-line deadline is ejected while another answers, not when every replica is slow', async () => {
  const [slow, fine] = await replicas('slow', 'fine');
  slow!.answers = 'stuck';
  const tg = await gateway([slow!, fine!], 60_000, 1, { timeouts: { responseHeadersMs: 200 } });
  const statuses = await askUntil(tg, () => lines(tg, 'replica ejected').length > 0, 60, 'ejection');
  assert.equal(statuses.filter((s) => s === 504).length, 3);
  assert.equal(lines(tg, 'replica ejected')[0]!['reason'], 'timeout');
  assert.equal(await metric(admin(tg), 'sluice_replica_ejections_total{service="svc",reason="timeout"}'), 1);

  const [x, y] = await replicas('x', 'y');
  x!.answers = 'stuck';
  y!.answers = 'stuck';
  const allSlow = await gateway([x!, y!], 60_000, 1, { timeouts: { responseHeadersMs: 200 } });
  for (let i = 0; i < 8; i++) assert.equal(await ask(allSlow), 504);
  assert.equal(lines(allSlow, 'replica ejected').length, 0);
});

/** A replica that can stop listening (connections refused) and listen again on the same port. */
async function flakyReplica(): Promise<{ url: string; answered: number; close(): Promise<void>; open(): Promise<void> }> {
  let server: Server | undefined;
  let port = 0;
  const flaky = {
    url: '',
    answered: 0,
    open: async (): Promise<void> => {
      server = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          flaky.answered++;
          res.end('flaky');
        });
      });
      await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
      port = (server.address() as AddressInfo).port;
      flaky.url = `http://127.0.0.1:${port}`;
    },
    close: async (): Promise<void> => {
      const s = server;
      server = undefined;
      if (s === undefined) return;
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
  await flaky.open();
  open.push({ close: () => flaky.close() });
  return flaky;
}

test('a replica that keeps refusing connections is ejected; a probe finding it accepting again brings it back at once, on probation', async () => {
  const flaky = await flakyReplica();
  const [good] = await replicas('good');
  const tg = await gateway([flaky, good!], 600_000);
  const moves = (from: string, to: string): number => tg.logs.filter((l) => l['msg'] === 'replica state' && l['replica'] === 'svc-1' && l['from'] === from && l['to'] === to).length;
  // Refused, out of rotation, probed back: three times; the requests it refused go to the other replica.
  for (let i = 1; i <= 3; i++) {
    await flaky.close();
    const statuses = await askUntil(tg, () => moves('ready', 'unreachable') === i, 20, `refusal ${i}`);
    assert.ok(statuses.every((s) => s === 200), 'a refused request is retried on the other replica');
    if (i === 3) break;
    await flaky.open();
    await eventually(() => moves('unreachable', 'ready') === i, 10_000, `back ${i}`);
  }
  const [line] = lines(tg, 'replica ejected');
  assert.equal(line?.['reason'], 'refused', 'three refusals in a row, each after a passing probe, eject it');
  assert.equal(line?.['replica'], 'svc-1');
  // Listening again: the recovery probe brings it back long before its 600 s backoff.
  await flaky.open();
  await eventually(() => lines(tg, 'replica returned from ejection').length === 1, 10_000, 'return');
  assert.equal(moves('unreachable', 'ready'), 3);
  await askUntil(tg, () => flaky.answered > 0, 20, 'a request answered by the returned replica');
  assert.equal((await ejectionsOnStatus(tg))['svc-1']!.ejected, false);
});
