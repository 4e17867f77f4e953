// A replica that fails quietly (docs/architecture.md#replicas-that-fail-quietly): it accepts
// connections and reports an empty queue (`vllm:num_requests_waiting 0`) but never answers, next
// to a healthy replica reporting a queue of 5. Reading loads alone sent it every request (40 of
// 40); the requests the gateway itself sees waiting for a status line now weigh in its score, so
// it stops getting requests and at least 30 of 40 are answered. Without `replicas.load`, in-flight
// counts steer away from it as before.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type LoadReplica, startLoadReplica } from '../helpers/load-replica.js';
import { eventually, sleep } from '../helpers/wait.js';

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

/** The caller's own patience: a request not answered in 5 s counts as not answered. */
const CLIENT_TIMEOUT_MS = 5_000;
/** The scenario's arrival rate: one request every 100 ms, as the user's client sent them. */
const EVERY_MS = 100;

async function pair(): Promise<{ stuck: LoadReplica; healthy: LoadReplica }> {
  const stuck = await startLoadReplica('stuck', 0);
  const healthy = await startLoadReplica('healthy', 5);
  stuck.answers = 'stuck';
  open.push(stuck, healthy);
  return { stuck, healthy };
}

/** One request; the name of the replica that answered, or null if it was not answered in time. */
async function ask(tg: TestGateway): Promise<string | null> {
  try {
    const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: AUTH, body: '{}', signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
    const text = await res.body.text();
    return res.statusCode === 200 ? text : null;
  } catch {
    return null;
  }
}

/** `n` requests arriving one every EVERY_MS (none waits for another's answer); who answered each. */
async function arrivals(tg: TestGateway, n: number): Promise<(string | null)[]> {
  const answers: Promise<string | null>[] = [];
  for (let i = 0; i < n; i++) {
    answers.push(ask(tg));
    // The load's shape (a steady rate), not a wait for something.
    await sleep(EVERY_MS);
  }
  return Promise.all(answers);
}

for (const workers of [1, 2]) {
  const title =
    workers === 1
      ? 'with replicas.load, a replica reporting an empty queue while answering nothing stops getting requests'
      : 'with replicas.load and worker threads: every thread counts its overdue requests into the same score';
  test(title, async (t) => {
    const { stuck, healthy } = await pair();
    const tg = await startTestGateway(rawService({ urls: [stuck.url, healthy.url], load: { preset: 'vllm' } }), { workers });
    open.push(tg);
    await eventually(
      async () => (await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-1"}')) === 0 && (await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-2"}')) === 5,
      10_000,
      'both readings',
    );
    const answers = await arrivals(tg, 40);
    const answered = answers.filter((a) => a === 'healthy').length;
    t.diagnostic(`${answered} of 40 answered; the stuck replica got ${stuck.seen.length}`);
    assert.ok(answered >= 30, `${answered} of 40 answered; the stuck replica got ${stuck.seen.length}`);
    assert.equal(answered + stuck.seen.length, 40, 'every request went to one replica or the other');
    assert.equal(healthy.seen.length, answered);
    // Its gauges still say it is idle: only the gateway's own view moved the requests.
    assert.equal(await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-1"}'), 0);
  });
}

test('without replicas.load, in-flight counts steer away from a replica that answers nothing', async (t) => {
  const { stuck, healthy } = await pair();
  const tg = await startTestGateway(rawService({ urls: [stuck.url, healthy.url] }), { workers: 1 });
  open.push(tg);
  const answers = await arrivals(tg, 40);
  const answered = answers.filter((a) => a === 'healthy').length;
  t.diagnostic(`${answered} of 40 answered; the stuck replica got ${stuck.seen.length}`);
  assert.ok(answered >= 30, `${answered} of 40 answered; the stuck replica got ${stuck.seen.length}`);
});
