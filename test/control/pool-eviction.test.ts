// Pools of units (docs/configuration.md#pools), black-box: real launched replicas
// (test/fixtures/pool-replica.ts) on a real gateway. Each replica journals its own start and exit,
// so the order of processes is read from them, never from timing.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Agent } from 'undici';
import { logged, metricSamples, startTestGateway } from '../helpers/gateway.js';
import { events, journalLines, open, pooled, POOL_REPLICA, post, scratch } from '../helpers/pool.js';
import { eventually, within } from '../helpers/wait.js';

const agent = new Agent({ connections: 20 });
after(() => agent.close());

test('{units} in env and command becomes the units the replica holds: units 2 on a pool of 2 get "0,1"', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const service = pooled('big', 'gpu', journal, { units: 2, command: [process.execPath, POOL_REPLICA, '--units={units}', '--port={port}'] }, { CUDA_VISIBLE_DEVICES: '{units}' });
  const tg = await startTestGateway(service, { pools: [{ name: 'gpu', size: 2 }], workers: 1 });
  try {
    const answer = await post(tg, 'big', '/echo', agent);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.units, '0,1', 'the env value');
    assert.equal(answer.body.argv?.[0], '--units=0,1', 'the argument');
    assert.match(String(answer.body.argv?.[1]), /^--port=\d+$/, '{port} still works beside it');
    const spawned = logged(tg, 'replica process spawned');
    assert.equal(spawned.length, 1);
    assert.equal(spawned[0]!.units, '0,1');
    assert.equal(spawned[0]!.pool, 'gpu');
    const samples = metricSamples(await (await fetch(`${tg.origin}/metrics`)).text());
    assert.equal(samples.get('sluice_pool_units{pool="gpu",state="used"}'), 2);
    assert.equal(samples.get('sluice_pool_units{pool="gpu",state="free"}'), 0);
  } finally {
    await tg.close();
  }
});

test('two services on a pool of 1: the second one\'s request stops the idle first, and its replica starts once that process has exited', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  // The first replica takes 300 ms to exit after SIGTERM (freeing its GPU): a start on the signal would journal first.
  const tg = await startTestGateway([pooled('a', 'gpu', journal, {}, { EXIT_DELAY_MS: '300' }), pooled('b', 'gpu', journal)], { pools: [{ name: 'gpu', size: 1 }], workers: 2 });
  try {
    const first = await post(tg, 'a', '/echo', agent);
    assert.equal(first.status, 200);
    assert.equal(first.body.units, '0');
    const second = await post(tg, 'b', '/echo', agent);
    assert.equal(second.status, 200);
    assert.equal(second.body.tag, 'b');
    assert.equal(second.body.units, '0', 'the unit the first held');
    assert.deepEqual(events(journal), ['start a', 'exit a', 'start b'], 'a exited before b started');
    const evicted = logged(tg, 'pool replica evicted');
    assert.equal(evicted.length, 1);
    assert.equal(evicted[0]!.service, 'a');
    assert.equal(evicted[0]!.for, 'b');
    assert.equal(evicted[0]!.pool, 'gpu');
    const stopped = tg.logs.filter((l) => l.msg === 'replica state' && l.service === 'a' && l.to === 'draining');
    assert.equal(stopped[0]!.reason, 'evicted');
    const samples = metricSamples(await (await fetch(`${tg.origin}/metrics`)).text());
    assert.equal(samples.get('sluice_pool_evictions_total{pool="gpu",service="a"}'), 1);
    assert.equal(samples.get('sluice_pool_evictions_total{pool="gpu",service="b"}'), 0);
    assert.equal(samples.get('sluice_pool_units{pool="gpu",state="used"}'), 1);
  } finally {
    await tg.close();
  }
});

test('three services on two units: the least recently used idle replica is the one stopped, each time', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const tg = await startTestGateway(['a', 'b', 'c'].map((s) => pooled(s, 'gpu', journal)), { pools: [{ name: 'gpu', size: 2 }], workers: 1 });
  try {
    assert.equal((await post(tg, 'a', '/echo', agent)).status, 200);
    assert.equal((await post(tg, 'b', '/echo', agent)).status, 200);
    assert.equal((await post(tg, 'a', '/echo', agent)).status, 200); // a is used again: b is now the least recent
    assert.equal((await post(tg, 'c', '/echo', agent)).status, 200);
    assert.equal((await post(tg, 'b', '/echo', agent)).status, 200); // a (used before c) goes
    assert.equal((await post(tg, 'c', '/echo', agent)).status, 200); // c is running: nothing stops
    assert.deepEqual(
      logged(tg, 'pool replica evicted').map((l) => `${String(l.service)} for ${String(l.for)}`),
      ['b for c', 'a for b'],
    );
    assert.deepEqual(events(journal), ['start a', 'start b', 'exit b', 'start c', 'exit a', 'start b']);
    // Never two live replicas on one unit: replay the journal.
    const holder = new Map<string, string>();
    const byPid = new Map<string, string>();
    for (const line of journalLines(journal)) {
      const [what, tag, pid, units] = line.split(' ');
      if (what === 'start') {
        for (const u of units!.split(',')) {
          assert.equal(holder.get(u), undefined, `unit ${u} given to ${tag} while ${String(holder.get(u))} holds it`);
          holder.set(u, pid!);
        }
        byPid.set(pid!, units!);
      } else {
        for (const u of byPid.get(pid!)!.split(',')) holder.delete(u);
      }
    }
  } finally {
    await tg.close();
  }
});

test('nothing idle: the start waits while the holder has a request in flight, then goes once it ended and the holder was stopped', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const gate = join(dir, 'gate');
  const tg = await startTestGateway([pooled('a', 'gpu', journal), pooled('b', 'gpu', journal)], {
    pools: [{ name: 'gpu', size: 1 }],
    workers: 2,
    admin: { host: '127.0.0.1', port: 0 },
  });
  try {
    const held = post(tg, 'a', `/held?gate=${encodeURIComponent(gate)}`, agent);
    await eventually(() => events(journal).length === 1, 10_000, 'a to start');
    await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.service === 'a' && l.to === 'ready'), 10_000, 'a to be ready');
    const waiting = post(tg, 'b', '/echo', agent);
    await eventually(() => logged(tg, 'pool start waiting').length === 1, 10_000, 'the start of b to wait');
    const line = logged(tg, 'pool start waiting')[0]!;
    assert.equal(line.service, 'b');
    assert.equal(line.free, 0);
    const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort}/status`)).json()) as { pools: { name: string; size: number; used: number; units: { unit: number; service: string | null; replica: string | null }[]; waiting: { service: string; units: number }[] }[] };
    assert.equal(status.pools.length, 1);
    assert.equal(status.pools[0]!.name, 'gpu');
    assert.equal(status.pools[0]!.size, 1);
    assert.equal(status.pools[0]!.units[0]!.service, 'a');
    assert.equal(status.pools[0]!.units[0]!.replica, 'a-1');
    assert.deepEqual(status.pools[0]!.waiting.map((w) => [w.service, w.units]), [['b', 1]]);
    assert.deepEqual(events(journal), ['start a'], 'a keeps running while its request is in flight');
    assert.equal(logged(tg, 'pool replica evicted').length, 0);
    open(gate);
    const [first, second] = await within(Promise.all([held, waiting]), 30_000, 'both answers');
    assert.equal(first.status, 200, 'the request in flight was answered');
    assert.equal(first.body.tag, 'a');
    assert.equal(second.status, 200);
    assert.equal(second.body.tag, 'b');
    assert.deepEqual(events(journal), ['start a', 'exit a', 'start b']);
    assert.equal(logged(tg, 'pool replica evicted').length, 1);
  } finally {
    await tg.close();
  }
});

test('a start that needs two units stops both idle holders, least recently used first, and spawns once both have exited', async () => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const services = [pooled('a', 'gpu', journal, {}, { EXIT_DELAY_MS: '200' }), pooled('b', 'gpu', journal, {}, { EXIT_DELAY_MS: '100' }), pooled('big', 'gpu', journal, { units: 2 })];
  const tg = await startTestGateway(services, { pools: [{ name: 'gpu', size: 2 }], workers: 2 });
  try {
    assert.equal((await post(tg, 'a', '/echo', agent)).status, 200);
    assert.equal((await post(tg, 'b', '/echo', agent)).status, 200);
    const big = await post(tg, 'big', '/echo', agent);
    assert.equal(big.status, 200);
    assert.equal(big.body.units, '0,1');
    assert.deepEqual(logged(tg, 'pool replica evicted').map((l) => l.service), ['a', 'b']);
    const order = events(journal);
    assert.deepEqual(order.slice(0, 2), ['start a', 'start b']);
    assert.deepEqual(order.slice(2, 4).sort(), ['exit a', 'exit b']);
    assert.equal(order[4], 'start big', 'big started after both exits');
    // The small services queue behind it now: a request to a waits, then evicts big once it is idle.
    const again = await post(tg, 'a', '/echo', agent);
    assert.equal(again.status, 200);
    assert.deepEqual(events(journal).slice(5), ['exit big', 'start a']);
  } finally {
    await tg.close();
  }
});
