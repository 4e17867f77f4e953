// Hostile and huge Prometheus endpoints through the real gateway (workers: 2, an admin listener):
// a reading reads at most 1 MiB and fails beyond it, a line over 4 KiB is skipped even when it
// holds the metric, and while an 8 MiB single line is read again and again the control plane
// still answers /healthz, grants queued requests of another service and keeps a healthy
// replica's reading, which shows the server's running requests on /status.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metricSamples, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type HostileReplica, startHostileReplica } from '../helpers/hostile-metrics.js';
import { type LoadReplica, startLoadReplica } from '../helpers/load-replica.js';
import type { StatusJson } from '../helpers/overview.js';
import { eventually } from '../helpers/wait.js';

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

async function hostile(name: string, mode: HostileReplica['mode'], bytes?: number): Promise<HostileReplica> {
  const r = await startHostileReplica(name, mode, bytes);
  open.push(r);
  return r;
}

async function loadReplica(name: string, waiting: number): Promise<LoadReplica> {
  const r = await startLoadReplica(name, waiting);
  open.push(r);
  return r;
}

async function gateway(services: Parameters<typeof startTestGateway>[0]): Promise<TestGateway & { admin: string }> {
  const tg = await startTestGateway(services, { workers: 2, admin: { host: '127.0.0.1', port: 0 } });
  open.push(tg);
  return Object.assign(tg, { admin: `http://127.0.0.1:${tg.gateway.adminPort}` });
}

/** One sample of the gateway's /metrics (on the admin listener). */
async function metric(tg: TestGateway & { admin: string }, sample: string): Promise<number | undefined> {
  return metricSamples(await (await fetch(`${tg.admin}/metrics`)).text()).get(sample);
}

/** The problem logged for each replica whose reading failed. */
function problems(tg: TestGateway): Record<string, string> {
  return Object.fromEntries(tg.logs.filter((l) => l.msg?.toString().startsWith('load reading failed')).map((l) => [String(l.replica), String(l.problem)]));
}

test('bodies over 1 MiB fail the reading (chunked or with a Content-Length, the metric beyond the limit); a line over 4 KiB holding the metric is skipped', async () => {
  const late = await hostile('late', 'late', 2 * 1024 * 1024);
  const lateLength = await hostile('late-length', 'late-length', 2 * 1024 * 1024);
  const longLine = await hostile('long-line', 'long-line');
  const justUnder = await hostile('just-under', 'late', 1024 * 1024 - 64 * 1024);
  const good = await loadReplica('good', 2);
  const tg = await gateway(rawService({ urls: [late.url, lateLength.url, longLine.url, justUnder.url, good.url], load: { preset: 'vllm', intervalMs: 1000 } }));
  // A reading's deadline is twice the interval: 2 s, so a busy machine does not time out the
  // readings that must succeed (the one just under 1 MiB among them).
  await eventually(() => Object.keys(problems(tg)).length >= 3, 30_000, 'three readings failed');
  assert.deepEqual(problems(tg), {
    'svc-1': 'larger than 1048576 bytes',
    'svc-2': 'larger than 1048576 bytes',
    'svc-3': 'no vllm:num_requests_waiting sample',
  });
  // Under the limit, the sample after 960 KiB of histogram lines is read.
  await eventually(async () => (await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-4"}')) === 3, 30_000, 'the reading just under 1 MiB');
  await eventually(async () => (await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-5"}')) === 2, 30_000, 'the good reading');
  for (const r of ['svc-1', 'svc-2', 'svc-3']) assert.equal(await metric(tg, `sluice_replica_waiting{service="svc",replica="${r}"}`), undefined, `${r} is weighed by in flight`);
  const status = (await (await fetch(`${tg.admin}/status`)).json()) as StatusJson;
  const loads = Object.fromEntries(status.services[0]!.loads.map((l) => [l.replica, l]));
  assert.equal(loads['svc-1']?.used, false);
  assert.equal(loads['svc-1']?.problem, 'larger than 1048576 bytes');
  assert.equal(loads['svc-5']?.used, true);
  assert.equal(loads['svc-5']?.running, 4, "the vllm preset reads the server's running requests");
  assert.equal(loads['svc-4']?.running, null, 'not exported: null');
  await eventually(() => late.scrapes >= 3 && lateLength.scrapes >= 3, 30_000, 'failed readings retried');
  assert.equal(Object.keys(problems(tg)).length, 3, 'each failure logged once');
  assert.equal(tg.logs.filter((l) => l.level === 50).length, 0, 'nothing at error level');
});

test('while an 8 MiB single line is read again and again, /healthz answers, a queued request of another service is granted, and a healthy reading stays fresh', async () => {
  const line = await hostile('line', 'line', 8 * 1024 * 1024);
  const healthy = await loadReplica('healthy', 1);
  const quiet = await loadReplica('quiet', 0);
  const tg = await gateway([
    rawService({ urls: [line.url, healthy.url], load: { preset: 'vllm', intervalMs: 250 } }),
    rawService({ urls: [quiet.url], concurrency: 1 }, { slug: 'quiet' }),
  ]);
  await eventually(() => problems(tg)['svc-1'] !== undefined, 10_000, 'the hostile reading failed');
  assert.equal(problems(tg)['svc-1'], 'larger than 1048576 bytes');

  const start = { line: line.scrapes, healthy: healthy.scrapes };
  let healthz = 0;
  let grants = 0;
  while (line.scrapes < start.line + 10) {
    const h = await fetch(`${tg.admin}/healthz`);
    assert.equal(h.status, 200);
    await h.arrayBuffer();
    healthz++;
    // The quiet service's one slot is taken; a second request waits in the queue for it.
    const held = await request(tg.url('/hold', 'quiet'), { method: 'POST', headers: AUTH, body: '' });
    await eventually(() => quiet.holding() === 1, 10_000, 'the slot taken');
    const queued = request(tg.url('/v1/chat/completions', 'quiet'), { method: 'POST', headers: AUTH, body: '{}' });
    await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="quiet",priority="0"}')) === 1, 10_000, 'a request queued');
    quiet.release();
    await held.body.text();
    const granted = await queued;
    assert.equal(granted.statusCode, 200);
    assert.equal(await granted.body.text(), 'quiet');
    grants++;
  }
  assert.ok(healthz >= 1 && grants >= 1, `${healthz} /healthz, ${grants} grants during ${line.scrapes - start.line} hostile readings`);
  assert.ok(healthy.scrapes - start.healthy >= 5, `the healthy replica was read along (${healthy.scrapes - start.healthy} times)`);
  assert.equal(problems(tg)['svc-2'], undefined, "the healthy replica's reading never failed or went stale");
  assert.equal(await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-2"}'), 1);
  assert.ok(line.cut >= 1, 'the hostile bodies were cut off, not read to their end');
});
