// Pools of units (docs/configuration.md#pools) through a replica's whole life: which start goes
// first when several wait, a start that fails, a reload that shrinks the pool, and a drain with the
// pool full. Real launched replicas (test/fixtures/pool-replica.ts) journal their starts and exits.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { Agent } from 'undici';
import { reloadTokens } from '../../src/cli/reload.js';
import { parseConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { logged, metric, metricSamples, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { events, open, pooled, post, scratch } from '../helpers/pool.js';
import { eventually, within } from '../helpers/wait.js';

const agent = new Agent({ connections: 20 });
after(() => agent.close());

const urgent = { tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256, priority: 5 }] };

test('several starts wait: freed units go to the highest priority first, then to the oldest', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const gate = join(dir, 'gate');
  const services = [pooled('a', 'gpu', journal), pooled('b', 'gpu', journal), pooled('c', 'gpu', journal, {}, {}, urgent), pooled('d', 'gpu', journal)];
  const tg = await startTestGateway(services, { pools: [{ name: 'gpu', size: 1 }], workers: 1 });
  try {
    const held = post(tg, 'a', `/held?gate=${encodeURIComponent(gate)}`, agent);
    await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.service === 'a' && l.to === 'ready'), 10_000, 'a to be ready');
    const answers: Promise<unknown>[] = [];
    // b, then c (priority 5), then d arrive, each queued before the next is sent.
    for (const [slug, priority] of [['b', 0], ['c', 5], ['d', 0]] as const) {
      answers.push(post(tg, slug, '/echo', agent));
      await eventually(async () => (await metric(tg, `sluice_queue_depth{service="${slug}",priority="${priority}"}`)) === 1, 10_000, `${slug}'s request to queue`);
    }
    assert.deepEqual(events(journal), ['start a'], 'every start waits while a has a request in flight');
    open(gate);
    await within(Promise.all([held, ...answers]), 30_000, 'every answer');
    assert.deepEqual(events(journal), ['start a', 'exit a', 'start c', 'exit c', 'start b', 'exit b', 'start d']);
  } finally {
    await tg.close();
  }
});

test('a replica that fails to start gives its units back: the next service starts on them', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  // b waits at most 5 s: were the unit never given back, its start would wait for it and fail.
  const services = [pooled('a', 'gpu', journal, {}, { FAIL_AT_START: '1' }), pooled('b', 'gpu', journal, {}, {}, { queue: { maxWaitMs: 5000 } })];
  const tg = await startTestGateway(services, { pools: [{ name: 'gpu', size: 1 }], workers: 1 });
  try {
    const failed = await post(tg, 'a', '/echo', agent);
    assert.equal(failed.status, 503);
    assert.equal(failed.headers['x-sluice-error'], 'no_replica');
    await eventually(async () => (await metric(tg, 'sluice_pool_units{pool="gpu",state="free"}')) === 1, 10_000, 'the unit to be free');
    const next = await post(tg, 'b', '/echo', agent);
    assert.equal(next.status, 200);
    assert.equal(next.body.units, '0');
    assert.deepEqual(events(journal), ['start a', 'exit a', 'start b']);
    assert.equal(logged(tg, 'pool replica evicted').length, 0);
  } finally {
    await tg.close();
  }
});

test('a reload that shrinks the pool and removes a service changes nothing until the restart: no unit held twice, nothing stopped', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const raw = (size: number, slugs: string[]) => ({ listen: { host: '127.0.0.1', port: 0 }, workers: 2, pools: [{ name: 'gpu', size }], services: slugs.map((s) => pooled(s, 'gpu', journal)) });
  const tg = await startTestGateway(raw(2, ['a', 'b']).services, { pools: [{ name: 'gpu', size: 2 }], workers: 2 });
  try {
    const a = await post(tg, 'a', '/echo', agent);
    const b = await post(tg, 'b', '/echo', agent);
    assert.deepEqual([a.body.units, b.body.units], ['0', '1']);
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
        callback();
      },
    });
    const logger = createLogger('info', sink);
    const current = parseConfig(raw(2, ['a', 'b']));
    const next = reloadTokens(tg.gateway, current, () => parseConfig(raw(1, ['a'])), 'sluice.yaml', undefined, logger);
    assert.equal(next.pools[0]!.size, 1);
    logger.flush?.();
    await eventually(() => lines.some((l) => l.msg === 'config changes other than tokens take effect on restart'), 5000, 'the reload warning');
    const warning = lines.find((l) => l.msg === 'config changes other than tokens take effect on restart')!;
    assert.deepEqual(warning.keys, ['pools', 'services[b]']);
    // Both replicas keep their units and serve; nothing was stopped or started.
    const again = [await post(tg, 'a', '/echo', agent), await post(tg, 'b', '/echo', agent)];
    assert.deepEqual(again.map((x) => [x.status, x.body.pid]), [[200, a.body.pid], [200, b.body.pid]]);
    assert.deepEqual(events(journal), ['start a', 'start b']);
    const samples = metricSamples(await (await fetch(`${tg.origin}/metrics`)).text());
    assert.equal(samples.get('sluice_pool_units{pool="gpu",state="used"}'), 2);
    assert.equal(samples.get('sluice_pool_units{pool="gpu",state="free"}'), 0);
  } finally {
    await tg.close();
  }
});

test('drain with the pool full: the waiting start never happens, its request gets 503 draining, the one in flight finishes', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const gate = join(dir, 'gate');
  const tg = await startTestGateway([pooled('a', 'gpu', journal), pooled('b', 'gpu', journal)], { pools: [{ name: 'gpu', size: 1 }], workers: 2 });
  try {
    const held = post(tg, 'a', `/held?gate=${encodeURIComponent(gate)}`, agent);
    await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.service === 'a' && l.to === 'ready'), 10_000, 'a to be ready');
    const waiting = post(tg, 'b', '/echo', agent);
    await eventually(() => logged(tg, 'pool start waiting').length === 1, 10_000, 'the start of b to wait');
    const drained = tg.gateway.drain();
    const refused = await within(waiting, 30_000, 'the waiting request\'s answer');
    assert.equal(refused.status, 503);
    assert.equal(refused.headers['x-sluice-error'], 'draining');
    open(gate);
    const finished = await within(held, 30_000, 'the answer in flight');
    assert.equal(finished.status, 200);
    assert.equal(finished.body.tag, 'a');
    await drained;
    assert.deepEqual(events(journal), ['start a', 'exit a'], 'b never started; a exited at the close');
    assert.equal(logged(tg, 'pool replica evicted').length, 0);
  } finally {
    await tg.close();
  }
});
