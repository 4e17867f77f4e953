// Cold starts that say when (docs/api.md#priority-and-waiting): a launched service whose replica
// (the demo model server) starts only when the test opens its gate. Before any start was measured
// everything is as it was: a plain keep-alive comment, `Retry-After: 1` on `queue_full` and on a
// request that will not wait, `expectedStartMs: null`. After one measured start, a second cold
// start: a request whose X-Sluice-Max-Wait-Ms is shorter than the expected start is refused at once
// (it never queues) with `Retry-After` the expected start, and the start it asked for goes on; the
// keep-alive comment says `ready in about N s`; `queue_full` while starting carries the expected time
// left; the requests waiting are answered when the replica is ready. With one data plane thread
// and two (the expected start is read across threads from shared memory).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { GATED_MODEL_SERVER } from '../helpers/overview.js';
import { WAITING } from '../helpers/sse-client.js';
import { eventually, sleep, within } from '../helpers/wait.js';

/** The replica's scripted load time on its first start: long enough that the expected start is
 *  above 2 s, so `Retry-After` while starting differs from the fixed `1` of a warm service. */
const FIRST_LOAD_MS = 3000;

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

interface ServiceStatusJson {
  expectedStartMs?: number | null;
  replicas: Record<string, number>;
}

interface Fixture {
  tg: TestGateway;
  open(): void;
  close(): void;
  status(): Promise<ServiceStatusJson>;
}

async function fixture(workers: number): Promise<Fixture> {
  const gate = join(mkdtempSync(join(tmpdir(), 'sluice-gate-')), 'open');
  const tg = await startTestGateway(
    rawService(
      { command: [process.execPath, GATED_MODEL_SERVER], env: { GATE_FILE: gate, TOKEN_DELAY_MS: '5' }, readyPath: '/health', max: 1, idleTimeoutMs: 200 },
      { slug: 'llm', queue: { keepAliveMs: 100, maxRequests: 1 } },
    ),
    { workers, admin: { host: '127.0.0.1', port: 0 } },
  );
  cleanups.push(() => tg.close());
  const admin = `http://127.0.0.1:${tg.gateway.adminPort}`;
  return {
    tg,
    open: () => writeFileSync(gate, ''),
    close: () => rmSync(gate, { force: true }),
    status: async () => ((await (await fetch(`${admin}/status`)).json()) as { services: ServiceStatusJson[] }).services[0]!,
  };
}

const CHAT = (stream: boolean): string => JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'hello' }], ...(stream ? { stream: true } : {}) });

/** A plain request: status, the two headers that matter here, the body. */
async function post(tg: TestGateway, headers: Record<string, string> = {}): Promise<{ status: number; retryAfter: string | undefined; error: string | undefined; body: string; id: string }> {
  const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json', ...headers }, body: CHAT(false) });
  const body = await res.body.text();
  const h = (name: string): string | undefined => (res.headers[name] === undefined ? undefined : String(res.headers[name]));
  return { status: res.statusCode, retryAfter: h('retry-after'), error: h('x-sluice-error'), body, id: String(res.headers['x-request-id']) };
}

/** A request for a streamed answer, read as it arrives: `text` so far, and the whole answer once over. */
function streaming(tg: TestGateway): { text: () => string; done: Promise<{ status: number; text: string }> } {
  let text = '';
  const done = (async () => {
    const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: CHAT(true) });
    for await (const chunk of res.body) text += (chunk as Buffer).toString();
    return { status: res.statusCode, text };
  })();
  return { text: () => text, done };
}

const READY_IN = /: waiting for a replica \(ready in about (\d+) s\)\n\n/;

async function accessLine(tg: TestGateway, id: string): Promise<Record<string, unknown>> {
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
  return tg.logs.find((l) => l.msg === 'request' && l.reqId === id)!;
}

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 60_000 }, () => {
    test('before a measured start as before; after one, a second cold start says when: Retry-After, an at-once refusal of a shorter max wait, the comment, /status', async () => {
      const f = await fixture(workers);
      const { tg } = f;
      assert.equal((await f.status()).expectedStartMs, null, 'no start measured yet');

      // ── The first cold start: nothing measured, nothing changes. ──
      const first = streaming(tg);
      await eventually(() => first.text().includes(WAITING), 10_000, 'the first keep-alive comment');
      const startedAt = performance.now();
      assert.equal(first.text().startsWith(WAITING), true, `a plain comment before any measured start: ${JSON.stringify(first.text())}`);
      assert.doesNotMatch(first.text(), READY_IN);
      const noWait = await post(tg, { 'x-sluice-max-wait-ms': '0' });
      assert.deepEqual([noWait.status, noWait.error, noWait.retryAfter], [503, 'no_replica', '1']);
      const full = await post(tg);
      assert.deepEqual([full.status, full.error, full.retryAfter], [503, 'queue_full', '1']);
      // The replica's scripted load time (its pace, not a wait for something): the first start takes at least this long.
      await sleep(FIRST_LOAD_MS - (performance.now() - startedAt));
      f.open();
      const firstDone = await within(first.done, 30_000, 'the first stream');
      assert.equal(firstDone.status, 200);
      assert.match(firstDone.text, /data: \[DONE\]/);
      assert.doesNotMatch(firstDone.text, READY_IN);
      const measured = (await f.status()).expectedStartMs;
      assert.equal(typeof measured, 'number', '/status gives the expected start once one was measured');
      const estimate = measured!;
      assert.ok(estimate >= FIRST_LOAD_MS, `the measured start ${estimate} ms covers the load time`);

      // The replica stops when idle: the service is cold again, its next replica waits for the gate.
      f.close();
      await eventually(async () => Object.values((await f.status()).replicas).every((n) => n === 0), 10_000, 'the idle replica stopped');

      // ── The second cold start. ──
      // A request that would not wait as long as the start is expected to take: refused at once.
      const seconds = String(Math.ceil(estimate / 1000));
      const short = await post(tg, { 'x-sluice-max-wait-ms': String(Math.floor(estimate / 2)) });
      assert.deepEqual([short.status, short.error, short.retryAfter], [503, 'no_replica', seconds]);
      assert.match(JSON.parse(short.body).error.message, /expected in about \d+ s/);
      assert.equal((await accessLine(tg, short.id)).queuedMs, undefined, 'refused without queueing');
      // The start it asked for goes on.
      await eventually(async () => (await f.status()).replicas['starting'] === 1, 10_000, 'the start asked for by the refused request');
      // While it starts: the keep-alive comment says when; a full queue says when too.
      const second = streaming(tg);
      await eventually(() => READY_IN.test(second.text()), 10_000, 'a comment saying when');
      const comment = Number(READY_IN.exec(second.text())![1]);
      assert.ok(comment >= 1 && comment <= Math.ceil(estimate / 1000), `ready in about ${comment} s, of an expected ${estimate} ms`);
      const fullWhileStarting = await post(tg);
      assert.equal(fullWhileStarting.status, 503);
      assert.equal(fullWhileStarting.error, 'queue_full');
      const left = Number(fullWhileStarting.retryAfter);
      assert.ok(left >= 2 && left <= Math.ceil(estimate / 1000), `queue_full while starting: Retry-After ${fullWhileStarting.retryAfter}, of an expected ${estimate} ms`);
      assert.equal((await f.status()).replicas['ready'], 0, 'all of it before the replica was ready');
      f.open();
      const secondDone = await within(second.done, 30_000, 'the second stream');
      assert.equal(secondDone.status, 200);
      assert.match(secondDone.text, /data: \[DONE\]/);
      const warm = await post(tg);
      assert.equal(warm.status, 200);
      assert.equal(warm.retryAfter, undefined);
      const after = (await f.status()).expectedStartMs;
      assert.equal(typeof after, 'number', 'still an expected start: the median of the two');
    });
  });
}
