// Prefix-aware routing (`routing.prefix`) through the real gateway and real replicas: requests
// whose prompts share leading blocks go to the replica that was sent them (1 and 2 workers), a
// burst sharing a prefix spreads within the load bound, a replica at its concurrency sheds the
// prefix to the next, an affinity header the caller sends wins, a body in separate packets or with
// its prompt spelled with escapes or given twice routes as the replica reads it, and a replica
// that leaves takes its prefixes with it.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metricSamples, rawService, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { type LoadReplica, startLoadReplica } from '../helpers/load-replica.js';
import { splitPost } from '../helpers/split-post.js';
import { connectionsOnEveryWorker } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

async function replicas(n: number): Promise<LoadReplica[]> {
  const list = await Promise.all(Array.from({ length: n }, (_, i) => startLoadReplica(String.fromCharCode(97 + i))));
  open.push(...list);
  return list;
}

async function gateway(list: LoadReplica[], routing: Record<string, unknown> = { prefix: { blockBytes: 64 } }, workers = 1, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: list.map((r) => r.url), ...extra }, { routing }), { workers });
  open.push(tg);
  return tg;
}

/** A system prompt of several blocks, different for each `n`. */
function system(n: number): string {
  return `System prompt number ${n}. `.repeat(30);
}

function chat(n: number, user: string): string {
  return JSON.stringify({ model: 'm', messages: [{ role: 'system', content: system(n) }, { role: 'user', content: user }] });
}

async function ask(tg: TestGateway, body: string, headers: Record<string, string> = {}, path = '/v1/chat/completions'): Promise<string> {
  const res = await request(tg.url(path), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json', ...headers }, body });
  assert.equal(res.statusCode, 200);
  return res.body.text();
}

test('requests sharing a prompt prefix go to the replica that was sent it; prompts that differ spread', async () => {
  const list = await replicas(3);
  const tg = await gateway(list);
  const home = new Map<number, string>();
  // 10 system prompts (not a multiple of 3: rotation would not keep them put by chance), 4 users each.
  for (let turn = 0; turn < 4; turn++) {
    for (let n = 0; n < 10; n++) {
      const name = await ask(tg, chat(n, `user ${turn} asks something different: ${'x'.repeat(turn * 50)}`));
      if (turn === 0) home.set(n, name);
      else assert.equal(name, home.get(n), `prompt ${n}, turn ${turn}`);
    }
  }
  assert.equal(new Set(home.values()).size, 3, 'the first requests of new prompts spread over every replica');
});

test('without the policy, the same prompts rotate over equal replicas', async () => {
  const list = await replicas(3);
  const tg = await gateway(list, {});
  const names: string[] = [];
  for (let i = 0; i < 6; i++) names.push(await ask(tg, chat(0, `turn ${i}`)));
  assert.deepEqual(names, ['a', 'b', 'c', 'a', 'b', 'c']);
});

test('a multi-turn chat with no session header stays on its replica as it grows', async () => {
  const list = await replicas(3);
  const tg = await gateway(list);
  const homes = new Set<string>();
  for (let c = 0; c < 5; c++) {
    const messages: { role: string; content: string }[] = [{ role: 'user', content: `Conversation ${c} begins with a question long enough to fill a block or two of prompt.` }];
    const first = await ask(tg, JSON.stringify({ model: 'm', messages }));
    homes.add(first);
    for (let turn = 1; turn < 5; turn++) {
      messages.push({ role: 'assistant', content: `answer ${turn} of conversation ${c}` }, { role: 'user', content: `follow-up ${turn}` });
      assert.equal(await ask(tg, JSON.stringify({ model: 'm', messages })), first, `conversation ${c}, turn ${turn}`);
    }
  }
  assert.ok(homes.size >= 2, 'conversations start on different replicas');
});

test('workers: 2 — a prefix sent through one worker is found through the other', async () => {
  const list = await replicas(3);
  // A looser bound: the previous request, answered through the other worker, may still count in
  // flight for a few microseconds after its caller has the answer.
  const tg = await gateway(list, { prefix: { blockBytes: 64 }, affinityMaxLoad: 3 }, 2);
  const [w0, w1] = await connectionsOnEveryWorker(tg, tg.origin, 2, 1);
  const clients = [w0![0]!.client, w1![0]!.client];
  open.push(...clients);
  const path = new URL(tg.url('/v1/chat/completions')).pathname;
  const homes = new Set<string>();
  for (let n = 0; n < 12; n++) {
    const names: string[] = [];
    // Each thread has its own turn among equal replicas: this order would split them without the policy.
    for (const [turn, i] of [0, 1, 1, 0, 1].entries()) {
      const res = await clients[i]!.request({ path, method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: chat(n, `turn ${turn} through worker ${i}`) });
      assert.equal(res.statusCode, 200);
      names.push(await res.body.text());
    }
    assert.equal(new Set(names).size, 1, `prompt ${n}: ${names.join(' ')}`);
    homes.add(names[0]!);
  }
  assert.equal(homes.size, 3, 'the prompts spread over every replica');
});

test('a burst sharing a prefix spreads within the load bound, to as few replicas as the bound needs', async () => {
  const list = await replicas(3);
  const tg = await gateway(list, { prefix: { blockBytes: 64 }, affinityMaxLoad: 2 });
  const homeName = await ask(tg, chat(7, 'first'));
  const burst = Array.from({ length: 30 }, (_, i) => request(tg.url('/hold'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: chat(7, `burst ${i}`) }));
  await eventually(() => list.reduce((n, r) => n + r.holding(), 0) === 30, 10_000, 'thirty held');
  const shown = list.map((x) => `${x.name} ${x.holding()}`).join(', ');
  const home = list.find((r) => r.name === homeName)!;
  // Each request is counted on its replica as it is taken: the home replica takes one while its
  // load is below ceil(2 × (total + 1) / 3) (21 at 30), then one overflows to the least loaded
  // replica, which now has the prefix too; the two share the rest, and the third is never needed.
  for (const r of list) assert.ok(r.holding() <= 21, `bounded: ${shown}`);
  assert.ok(home.holding() > 0, `the home replica took part: ${shown}`);
  assert.equal(list.filter((r) => r.holding() > 0).length, 2, `two replicas share the burst: ${shown}`);
  for (const r of list) r.release();
  for (const res of await Promise.all(burst)) await res.body.text();
});

test('a replica at its concurrency sheds the prefix to the next', async () => {
  const list = await replicas(2);
  const tg = await gateway(list, { prefix: { blockBytes: 64 }, affinityMaxLoad: 100 }, 1, { concurrency: 2 });
  const homeName = await ask(tg, chat(3, 'first'));
  const other = list.find((r) => r.name !== homeName)!;
  const home = list.find((r) => r.name === homeName)!;
  const held = [0, 1].map((i) => request(tg.url('/hold'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: chat(3, `held ${i}`) }));
  await eventually(() => home.holding() === 2, 10_000, 'the home replica full');
  assert.equal(other.holding(), 0, 'both held requests went home');
  assert.equal(await ask(tg, chat(3, 'while full')), other.name, 'shed to the next replica');
  home.release();
  for (const res of await Promise.all(held)) await res.body.text();
  assert.equal(await ask(tg, chat(3, 'room again')), homeName, 'home again: it was sent the prefix first and most');
});

test('an affinity header the caller sends wins over the prompt', async () => {
  const list = await replicas(3);
  const tg = await gateway(list, { prefix: { blockBytes: 64 }, affinityHeader: 'X-Session-Id' });
  const homeName = await ask(tg, chat(1, 'first'));
  // Sessions whose ring place is another replica than the prompt's: the session's replica answers.
  let differing = 0;
  for (let s = 0; s < 30; s++) {
    const viaSession = await ask(tg, '{"model":"m"}', { 'x-session-id': `session-${s}` });
    const withPrompt = await ask(tg, chat(1, `session ${s}`), { 'x-session-id': `session-${s}` });
    assert.equal(withPrompt, viaSession, `session-${s}`);
    if (viaSession !== homeName) differing++;
  }
  assert.ok(differing > 0, 'some sessions live elsewhere than the prompt');
});

test('a body in separate packets, with its prompt spelled in escapes or given twice, routes as the replica reads it', async () => {
  const list = await replicas(3);
  const tg = await gateway(list);
  const path = new URL(tg.url('/v1/chat/completions')).pathname;
  const homes = new Map<number, string>();
  for (let n = 0; n < 6; n++) homes.set(n, await ask(tg, chat(n, 'plain')));
  const headers = { ...AUTH, 'content-type': 'application/json' };
  for (let n = 0; n < 6; n++) {
    const body = chat(n, 'split');
    const cut = [body.slice(0, 40), body.slice(40, 300), body.slice(300)];
    const split = await splitPost(tg.port, path, headers, cut, 20);
    assert.equal(split.status, 200);
    assert.equal(split.body, homes.get(n), `prompt ${n} in three packets`);
    // Every letter of the system prompt as a \u escape, and the keys with spaces around them: the same prompt to Python's json.
    const escaped = `{ "model" : "m", "m\\u0065ssages" : [ { "role" : "system", "content" : "${[...system(n)].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}" }, { "role": "user", "content": "escaped" } ] }`;
    assert.equal(await ask(tg, escaped), homes.get(n), `prompt ${n} in escapes`);
    // Given twice: the last `messages` is the one the replica reads.
    const other = (n + 1) % 6;
    const twice = `{"model":"m","messages":${JSON.stringify(JSON.parse(chat(other, 'x')).messages)},"messages":${JSON.stringify(JSON.parse(chat(n, 'y')).messages)}}`;
    assert.equal(await ask(tg, twice), homes.get(n), `prompt ${n} given last`);
  }
});

test('a replica that leaves takes its prefixes with it: they go elsewhere and stay together', async () => {
  const list = await replicas(3);
  const tg = await gateway(list);
  const homes = new Map<number, string>();
  for (let n = 0; n < 9; n++) homes.set(n, await ask(tg, chat(n, 'first')));
  const leaving = list.find((r) => r.name === homes.get(0))!;
  await leaving.close(); // refuses connections from now on: retried elsewhere, then out of rotation
  for (let n = 0; n < 9; n++) {
    const now = await ask(tg, chat(n, 'after'));
    if (homes.get(n) === leaving.name) assert.notEqual(now, leaving.name);
    else assert.equal(now, homes.get(n), `prompt ${n} stayed`);
    const again = await ask(tg, chat(n, 'again'));
    assert.equal(again, now, `prompt ${n} stays on its new replica`);
  }
});

test('/status and the metrics show the prompt-cache hits the gateway expected, per service and replica', async () => {
  const list = await replicas(2);
  const tg = await startTestGateway(rawService({ urls: list.map((r) => r.url) }, { routing: { prefix: { blockBytes: 64, maxBlocks: 8 } } }), { workers: 1, admin: { host: '127.0.0.1', port: 0 } });
  open.push(tg);
  // The same 8-block prefix three times: 0 of 8 blocks the first time, 8 of 8 twice after.
  for (let i = 0; i < 3; i++) await ask(tg, chat(0, `user ${i}`));
  const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort}/status`)).json()) as { services: { routing: { prefix: Record<string, unknown> & { replicas: Record<string, unknown>[] } } }[] };
  const prefix = status.services[0]!.routing.prefix;
  assert.deepEqual({ ...prefix, replicas: undefined }, { blockBytes: 64, maxBlocks: 8, indexSize: 8192, requests: 3, blocks: 24, matched: 16, hitRate: 0.667, replicas: undefined });
  const home = prefix.replicas.find((r) => r.requests === 3)!;
  assert.deepEqual(home, { replica: home.replica, requests: 3, blocks: 24, matched: 16, hitRate: 0.667 });
  assert.equal(prefix.replicas.length, 2);
  const samples = metricSamples(await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort}/metrics`)).text());
  assert.equal(samples.get('sluice_prefix_blocks_total{service="svc",kind="sent"}'), 24);
  assert.equal(samples.get('sluice_prefix_blocks_total{service="svc",kind="matched"}'), 16);
  const ratio = samples.get(`sluice_replica_prefix_hit_ratio{service="svc",replica="${String(home.replica)}"}`);
  assert.ok(ratio !== undefined && Math.abs(ratio - 2 / 3) < 1e-9, String(ratio));
});

test('through a router: requests sharing a prompt prefix go to the replica of their service that was sent it', async () => {
  const list = await replicas(3);
  const service = { ...rawService({ urls: list.map((r) => r.url) }, { routing: { prefix: { blockBytes: 64 } } }), models: ['m'] };
  const tg = await startTestGateway(service, { workers: 1, routers: [{ slug: 'models', tokens: [{ name: 'router-caller', sha256: TEST_TOKEN_SHA256 }] }] });
  open.push(tg);
  const home = new Map<number, string>();
  for (let turn = 0; turn < 3; turn++) {
    for (let n = 0; n < 7; n++) {
      const res = await request(tg.url('/v1/chat/completions', 'models'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: chat(n, `turn ${turn}`) });
      assert.equal(res.statusCode, 200);
      const name = await res.body.text();
      if (turn === 0) home.set(n, name);
      else assert.equal(name, home.get(n), `prompt ${n}, turn ${turn}`);
    }
  }
  assert.equal(new Set(home.values()).size, 3);
});
