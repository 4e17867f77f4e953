// A reload never moves counts from one token to another, nor leaks them (docs/api.md#limits-per-caller),
// black-box with `workers: 2`: a token limited to 2 requests at once is renamed back and forth
// (same secret) by reloads while requests run on both workers; each worker applies a reload on its
// own time (the reloads come faster than they apply some), and requests keep coming under the name
// it still has, some of them waiting for their
// admission (for the shared store's places, with a real redis-server) across the reload. Once
// everything ended, the token's count is back to nothing: it can have exactly 2 requests at once
// again, and /status says none is in flight.
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { AUTH, rawService, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually, sleep, within } from '../helpers/wait.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';

let replica: TestReplica;
let redis: TestRedis | undefined;
const gateways: TestGateway[] = [];
const held: ServerResponse[] = [];
const open: WorkerConnection[] = [];

function service(name: string): ReturnType<typeof rawService> {
  return rawService({ urls: [replica.url] }, { tokens: [{ name, sha256: TEST_TOKEN_SHA256, limits: { concurrent: 2, tokensPerMinute: 1_000_000 } }] });
}

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.setHeader('content-type', 'application/json');
    if (req.url === '/hold') held.push(res);
    // A short wait, so that requests are in flight when a reload comes.
    else setTimeout(() => res.end('{"usage":{"prompt_tokens":1,"completion_tokens":1}}'), 2);
  });
});

after(async () => {
  for (const res of held) res.end('{}');
  for (const c of open) await c.client.close();
  for (const tg of gateways) await tg.close();
  await replica?.close();
  await redis?.close();
});

async function tokenUse(tg: TestGateway): Promise<{ token: string; concurrent: { used: number }; tokensPerMinute: { reserved: number } }[]> {
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as { services: { limits: never[] }[] };
  return status.services[0]!.limits;
}

async function renamedUnderLoad(top: Record<string, unknown>): Promise<void> {
  const extra = { workers: 2, admin: { host: '127.0.0.1', port: 0 }, ...top };
  const tg = await startTestGateway(service('a'), extra);
  gateways.push(tg);
  if (top['limits'] !== undefined) await eventually(() => tg.logs.some((l) => l.msg === 'limit store reachable'), 10_000, 'the gateway to reach the store');
  const config = (name: string): ReturnType<typeof parseConfig> => parseConfig({ listen: { host: '127.0.0.1', port: 0 }, ...extra, services: [service(name)] });
  const byWorker = await connectionsOnEveryWorker(tg, tg.origin, 2, 3);
  const conns = byWorker.flat();
  open.push(...conns);
  const path = new URL(tg.url('/x')).pathname;
  let stop = false;
  const statuses = new Map<number, number>();
  // Each connection sends requests one after another until told to stop (admitted or refused by
  // `concurrent`: 6 connections for 2 places).
  const load = conns.map(async (c) => {
    while (!stop) {
      const res = await c.client.request({ path, method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"max_tokens":5}' });
      await res.body.dump();
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      // The store's answer came too late for this one (a busy machine): it used nothing.
      if (res.statusCode === 503) await sleep(5);
    }
  });
  const reloads = (): number => tg.logs.filter((l) => l.msg === 'tokens reloaded').length;
  // Reloads come faster than the workers apply some of them (a scripted pace): a worker admits
  // under a name the control plane has already replaced.
  const seen = reloads();
  for (let i = 1; i <= 30; i++) {
    tg.gateway.reload(config(i % 2 === 1 ? 'b' : 'a'));
    await sleep(10);
  }
  await eventually(() => reloads() >= seen + 60, 20_000, 'both workers to apply every reload');
  // Some requests admitted under the last name before the load stops.
  const admitted = statuses.get(200) ?? 0;
  await eventually(() => (statuses.get(200) ?? 0) >= admitted + 6, 20_000, 'requests admitted after the last reload');
  stop = true;
  await within(Promise.all(load), 20_000, 'the load to stop');
  assert.ok((statuses.get(200) ?? 0) > 20, `requests were admitted during the reloads: ${JSON.stringify([...statuses])}`);
  // Nothing runs now: the token (named `a` again) holds nothing.
  await eventually(async () => (await tokenUse(tg)).every((t) => t.concurrent.used === 0 && t.tokensPerMinute.reserved === 0), 10_000, 'no place or reservation left');
  // It has its 2 places, and only 2 (a request the store decided too late, 503, used nothing: sent again).
  const holdPath = new URL(tg.url('/hold')).pathname;
  const send = (c: WorkerConnection, to: string): Promise<number> =>
    c.client.request({ path: to, method: 'POST', headers: AUTH, body: '{}' }).then(async (res) => {
      await res.body.dump();
      return res.statusCode;
    });
  const holdOne = async (c: WorkerConnection): Promise<{ answer: Promise<number> }> => {
    for (let i = 0; ; i++) {
      const before = held.length;
      let status: number | undefined;
      const answer = send(c, holdPath);
      void answer.then((x) => (status = x));
      await eventually(() => held.length > before || status !== undefined, 10_000, 'a held request at the replica, or its answer');
      if (held.length > before) return { answer };
      if (status !== 503 || i >= 20) assert.fail(`a held request was answered ${String(status)}: its place was taken`);
    }
  };
  const first = await holdOne(conns[0]!);
  const second = await holdOne(conns[3]!);
  let third = await send(conns[1]!, path);
  for (let i = 0; third === 503 && i < 20; i++) third = await send(conns[1]!, path);
  assert.equal(third, 429, 'a third is refused');
  for (const res of held.splice(0)) res.end('{}');
  assert.deepEqual([await first.answer, await second.answer], [200, 200]);
}

test('workers: 2 — renaming a token by reloads while its requests run on both workers leaves no count behind', async () => {
  await renamedUnderLoad({});
});

test('workers: 2, the shared store — requests waiting for the store across a rename leave no count behind', { skip: REDIS_SKIP }, async () => {
  redis = await startRedis();
  await renamedUnderLoad({ limits: { store: redis.url, prefix: 'rename:', onStoreDown: 'refuse' } });
});
