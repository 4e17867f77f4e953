// Priority in the queue through the real gateway: tokens with priorities and `X-Sluice-Priority`,
// one replica with `concurrency: 1` held busy while requests queue, then the order in which they
// reach it. Highest first, arrival order among equals (exactly FIFO with one priority), a full
// queue displacing the most recent of the lowest, the header's bounds, and the same across two
// worker threads.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Client, request } from 'undici';
import { AUTH, rawService, secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { connectionsOnEveryWorker } from '../helpers/workers.js';
import { sha256Hex } from '../../src/cli/token.js';
import { parseConfig } from '../../src/config/load.js';
import { eventually } from '../helpers/wait.js';

const CHAT = secret('slc_test_chat_token_priority_ten_0123456789abcdef');
const BATCH = secret('slc_test_batch_token_priority_minus_ten_0123456789');
const BULK = secret('slc_test_bulk_token_priority_five_added_by_reload_0123');
const DISPLACED = "The queue is full and a higher-priority request took this request's place.";
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const TOKENS = [
  { name: 'default', sha256: TEST_TOKEN_SHA256 },
  { name: 'chat', sha256: sha256Hex(CHAT), priority: 10 },
  { name: 'batch', sha256: sha256Hex(BATCH), priority: -10 },
];

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

interface Setup {
  tg: TestGateway;
  replica: TestReplica;
  /** Bodies in the order they reached the replica (the held one first). */
  order: string[];
  /** Lets the held request finish: the queue drains one by one (concurrency 1). */
  release(): void;
}

async function setup(queue: Record<string, unknown> = {}, workers = 1): Promise<Setup> {
  const order: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const replica = await startReplica(async (req, res) => {
    const body = (await readBody(req)).toString();
    order.push(body);
    if (body === 'hold') await released;
    res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
  });
  open.push(replica);
  const tg = await startTestGateway(rawService({ urls: [replica.url], concurrency: 1 }, { tokens: TOKENS, queue: { maxWaitMs: 30_000, ...queue } }), { workers });
  open.push(tg);
  return { tg, replica, order, release };
}

/** Every `sluice_queue_depth` sample of the service, by priority label. */
async function depths(tg: TestGateway): Promise<Record<string, number>> {
  const text = await (await fetch(`${tg.origin}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^sluice_queue_depth\{service="svc",priority="(-?\d+)"\} (\d+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const total = (d: Record<string, number>): number => Object.values(d).reduce((a, b) => a + b, 0);

interface Answer {
  status: number;
  text: string;
  error: string | undefined;
}

/**
 * Sends a request and waits until it is queued (the queue depth grew by one); its answer comes in
 * `answer` (wrapped: an async function returning a promise would wait for it).
 */
async function queueOne(tg: TestGateway, body: string, headers: Record<string, string>, client?: Client): Promise<{ answer: Promise<Answer> }> {
  const before = total(await depths(tg));
  const path = new URL(tg.url('/x')).pathname;
  const sent = (client === undefined ? request(tg.url('/x'), { method: 'POST', headers, body }) : client.request({ path, method: 'POST', headers, body })).then(async (res) => ({
    status: res.statusCode,
    text: await res.body.text(),
    error: res.headers['x-sluice-error'] as string | undefined,
  }));
  await eventually(async () => total(await depths(tg)) === before + 1, 10_000, `${body} queued`);
  return { answer: sent };
}

/** A request that occupies the replica's one slot until `release()`; its answer in `answer`. */
async function hold(s: Setup): Promise<{ answer: Promise<unknown> }> {
  const answer = request(s.tg.url('/x'), { method: 'POST', headers: AUTH, body: 'hold' }).then((res) => res.body.text());
  await eventually(() => s.order.length === 1, 10_000, 'the held request at the replica');
  return { answer };
}

test('highest priority first, arrival order among equals; the depth by priority', async () => {
  const s = await setup();
  const held = await hold(s);
  const answers = [];
  for (const [body, token] of [
    ['batch-1', BATCH],
    ['default-1', undefined],
    ['chat-1', CHAT],
    ['batch-2', BATCH],
    ['chat-2', CHAT],
    ['default-2', undefined],
  ] as const) {
    answers.push((await queueOne(s.tg, body, token === undefined ? AUTH : bearer(token))).answer);
  }
  assert.deepEqual(await depths(s.tg), { '10': 2, '0': 2, '-10': 2 });
  s.release();
  await held.answer;
  for (const a of await Promise.all(answers)) assert.equal(a.status, 200);
  assert.deepEqual(s.order.slice(1), ['chat-1', 'chat-2', 'default-1', 'default-2', 'batch-1', 'batch-2']);
  assert.deepEqual(await depths(s.tg), { '10': 0, '0': 0, '-10': 0 }, 'the tokens’ priorities stay at 0');
});

test('with one priority the queue is exactly FIFO', async () => {
  const s = await setup();
  const held = await hold(s);
  const answers = [];
  for (let i = 0; i < 8; i++) answers.push((await queueOne(s.tg, `r${i}`, bearer(CHAT))).answer);
  s.release();
  await held.answer;
  await Promise.all(answers);
  assert.deepEqual(s.order.slice(1), ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7']);
});

test('a full queue: a higher arrival displaces the most recent of the lowest (503 queue_full); an arrival no higher is refused', async () => {
  const s = await setup({ maxRequests: 3 });
  const held = await hold(s);
  const batch1 = (await queueOne(s.tg, 'batch-1', bearer(BATCH))).answer;
  const default1 = (await queueOne(s.tg, 'default-1', AUTH)).answer;
  const batch2 = (await queueOne(s.tg, 'batch-2', bearer(BATCH))).answer;
  // Full. A chat request takes batch-2's place (the most recent of the lowest priority).
  const chat = request(s.tg.url('/x'), { method: 'POST', headers: bearer(CHAT), body: 'chat' });
  const displaced = await batch2;
  assert.equal(displaced.status, 503);
  assert.equal(displaced.error, 'queue_full');
  assert.equal((JSON.parse(displaced.text) as { error: { message: string } }).error.message, DISPLACED, 'told it was displaced, not that the queue was full when it came');
  assert.deepEqual(await depths(s.tg), { '10': 1, '0': 1, '-10': 1 });
  // Another batch request: nothing lower to displace, so it is refused itself.
  const refused = await request(s.tg.url('/x'), { method: 'POST', headers: bearer(BATCH), body: 'batch-3' });
  assert.equal(refused.statusCode, 503);
  assert.equal(refused.headers['x-sluice-error'], 'queue_full');
  assert.equal(refused.headers['retry-after'], '1');
  assert.equal(((await refused.body.json()) as { error: { message: string } }).error.message, 'The service queue is full (3 requests); retry later.');
  // A default request displaces batch-1; a second one displaces nobody (only its equal and higher are left).
  const default2 = request(s.tg.url('/x'), { method: 'POST', headers: AUTH, body: 'default-2' });
  assert.equal((await batch1).error, 'queue_full');
  const default3 = await request(s.tg.url('/x'), { method: 'POST', headers: AUTH, body: 'default-3' });
  assert.equal(default3.statusCode, 503);
  await default3.body.text();
  s.release();
  await held.answer;
  assert.equal((await chat).statusCode, 200);
  await (await chat).body.text().catch(() => undefined);
  assert.equal((await default1).status, 200);
  assert.equal((await default2).statusCode, 200);
  assert.deepEqual(s.order, ['hold', 'chat', 'default-1', 'default-2']);
  const waits = await (await fetch(`${s.tg.origin}/metrics`)).text();
  assert.match(waits, /^sluice_queue_wait_seconds_count\{service="svc",outcome="displaced"\} 2$/m);
  // Each displacement is logged at info, with the priorities and how long the waiter had waited.
  const displacedLines = () => s.tg.logs.filter((l) => l.msg === 'queued request displaced');
  await eventually(() => displacedLines().length === 2, 10_000, 'both displacements logged');
  const lines = displacedLines();
  assert.deepEqual(
    lines.map((l) => ({ level: l.level, service: l.service, priority: l.priority, for: l.for, waited: typeof l.waitedMs === 'number' })),
    [
      { level: 30, service: 'svc', priority: -10, for: 10, waited: true },
      { level: 30, service: 'svc', priority: -10, for: 0, waited: true },
    ],
  );
});

test('a reload (SIGHUP) that adds a token of a new priority keeps its depth series; a priority no token has any more loses its series once empty', async () => {
  const s = await setup();
  const held = await hold(s);
  const batch = (await queueOne(s.tg, 'batch-1', bearer(BATCH))).answer;
  assert.deepEqual(await depths(s.tg), { '-10': 1 });
  // The tokens reloaded as SIGHUP does: batch (-10) removed, bulk (5) added.
  const tokens = [...TOKENS.filter((t) => t.name !== 'batch'), { name: 'bulk', sha256: sha256Hex(BULK), priority: 5 }];
  s.tg.gateway.reload(parseConfig({ listen: { host: '127.0.0.1', port: 0 }, services: [rawService({ urls: [s.replica.url], concurrency: 1 }, { tokens, queue: { maxWaitMs: 30_000 } })] }));
  assert.deepEqual(await depths(s.tg), { '-10': 1 }, 'a request still waits at -10');
  const bulk = (await queueOne(s.tg, 'bulk-1', bearer(BULK))).answer;
  assert.deepEqual(await depths(s.tg), { '5': 1, '-10': 1 });
  s.release();
  await held.answer;
  assert.equal((await bulk).status, 200);
  assert.equal((await batch).status, 200, 'queued before the reload, served after it');
  assert.deepEqual(s.order, ['hold', 'bulk-1', 'batch-1']);
  assert.deepEqual(await depths(s.tg), { '5': 0 }, 'the new token’s priority stays at 0; the removed one’s series is gone');
});

test('X-Sluice-Priority only lowers: above the token counts as the token, below lowers it; not an integer is 400; never forwarded', async () => {
  const s = await setup();
  const held = await hold(s);
  const answers = [
    (await queueOne(s.tg, 'default-as-0', AUTH)).answer,
    (await queueOne(s.tg, 'default-asks-50', { ...AUTH, 'x-sluice-priority': '50' })).answer,
    (await queueOne(s.tg, 'chat-lowered-to--5', { ...bearer(CHAT), 'x-sluice-priority': '-5' })).answer,
    (await queueOne(s.tg, 'chat-asks-10', { ...bearer(CHAT), 'x-sluice-priority': '+10' })).answer,
    (await queueOne(s.tg, 'default-far-below', { ...AUTH, 'x-sluice-priority': '-99999999999999999999' })).answer,
  ];
  assert.deepEqual(await depths(s.tg), { '10': 1, '0': 2, '-5': 1, '-1000': 1 }, 'a value below -1000 counts as -1000');
  for (const bad of ['high', '1.5', '', ' ', '0x10', '1e3', '- 3', '3,4']) {
    const res = await request(s.tg.url('/x'), { method: 'POST', headers: { ...AUTH, 'x-sluice-priority': bad }, body: 'bad' });
    assert.equal(res.statusCode, 400, JSON.stringify(bad));
    assert.equal(res.headers['x-sluice-error'], 'bad_request');
    assert.match(await res.body.text(), /X-Sluice-Priority must be an integer/);
  }
  const twice = await request(s.tg.url('/x'), { method: 'POST', headers: [...Object.entries(AUTH).flat(), 'x-sluice-priority', '1', 'x-sluice-priority', '2'], body: 'bad' });
  assert.equal(twice.statusCode, 400);
  assert.match(await twice.body.text(), /more than once/);
  s.release();
  await held.answer;
  await Promise.all(answers);
  assert.deepEqual(s.order.slice(1), ['chat-asks-10', 'default-as-0', 'default-asks-50', 'chat-lowered-to--5', 'default-far-below']);
  assert.deepEqual(await depths(s.tg), { '10': 0, '0': 0 }, 'lowered priorities no token has leave no series behind');
  for (const seen of s.replica.seen) assert.equal(seen.headers['x-sluice-priority'], undefined, 'never forwarded');
  assert.ok(!s.order.includes('bad'), 'a refused request reaches no replica');
});

test('workers: 2 — the request that should go next goes next, whichever worker holds it', async () => {
  const s = await setup({}, 2);
  const [w0, w1] = await connectionsOnEveryWorker(s.tg, s.tg.origin, 2, 3);
  const clients = [w0![0]!, w1![0]!, w0![1]!, w1![1]!, w0![2]!, w1![2]!].map((c) => c.client);
  open.push(...clients);
  const held = await hold(s);
  const plan: [string, Record<string, string>][] = [
    ['batch-1', bearer(BATCH)],
    ['default-1', AUTH],
    ['chat-1', bearer(CHAT)],
    ['default-2', AUTH],
    ['chat-2', bearer(CHAT)],
    ['batch-2', bearer(BATCH)],
  ];
  const answers = [];
  for (let i = 0; i < plan.length; i++) answers.push((await queueOne(s.tg, plan[i]![0], plan[i]![1], clients[i])).answer);
  s.release();
  await held.answer;
  for (const a of await Promise.all(answers)) assert.equal(a.status, 200);
  assert.deepEqual(s.order.slice(1), ['chat-1', 'chat-2', 'default-1', 'default-2', 'batch-1', 'batch-2']);
});
