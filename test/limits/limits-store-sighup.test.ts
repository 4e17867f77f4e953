// `sluice serve` with workers: 2, the shared store (a real redis-server: test/helpers/redis.ts)
// and SIGHUP (docs/configuration.md#reloading-sighup): the reloaded limits reach the store, a token
// that stays keeps what it used (the store's count), a token the reload limits starts to be
// limited, and the store's counts are shared with a second gateway throughout.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { type CliGateway, startCliGateway } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const KEPT = 'slc_token_kept_across_the_reload_5555555555555555555';
const OTHER = 'slc_token_limited_by_the_reload_666666666666666666666';

const gws: CliGateway[] = [];
let replica: TestReplica | undefined;
let redis: TestRedis | undefined;

after(async () => {
  for (const gw of gws) if (gw.child.exitCode === null) gw.child.kill('SIGKILL');
  await replica?.close();
  await redis?.close();
});

function config(otherLimits: Record<string, unknown> | undefined): Record<string, unknown> {
  return {
    workers: 2,
    // refuse: a request that waits past its 50 ms for the store (a busy machine) gets 503 and is sent again (statusWith).
    limits: { store: redis!.url, prefix: 'hup:', onStoreDown: 'refuse' },
    services: [
      {
        slug: 'svc',
        tokens: [
          { name: 'kept', sha256: sha256Hex(KEPT), limits: { requestsPerMinute: 2 } },
          { name: 'other', sha256: sha256Hex(OTHER), ...(otherLimits === undefined ? {} : { limits: otherLimits }) },
        ],
        replicas: { urls: [replica!.url] },
      },
    ],
  };
}

/** The status of a request the store decided on (a 503 limits_unavailable used nothing: sent again). */
async function statusWith(gw: CliGateway, token: string): Promise<number> {
  for (let i = 0; ; i++) {
    const res = await fetch(gw.url('/x', 'svc'), { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
    await res.arrayBuffer();
    if (res.status !== 503 || res.headers.get('x-sluice-error') !== 'limits_unavailable' || i >= 20) return res.status;
  }
}

test('workers: 2 on a redis store — SIGHUP reloads limits; the store keeps the counts and shares them', { skip: REDIS_SKIP }, async () => {
  redis = await startRedis();
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('{}');
  });
  const a = await startCliGateway(config(undefined));
  gws.push(a);
  const b = await startCliGateway(config(undefined));
  gws.push(b);
  for (const gw of [a, b]) await eventually(() => gw.logs.some((l) => l.msg === 'limit store reachable'), 10_000, 'the gateways to reach the store');
  // Two of the four in all, whichever gateway admits them (a grant that came after its request
  // gave up waiting stays with that gateway for its next request).
  const kept = [await statusWith(a, KEPT), await statusWith(b, KEPT), await statusWith(a, KEPT), await statusWith(b, KEPT)];
  assert.deepEqual(kept.slice().sort(), [200, 200, 429, 429], `kept: ${kept.join(' ')}`);
  assert.equal(kept[0], 200);
  for (let i = 0; i < 3; i++) assert.equal(await statusWith(i % 2 === 0 ? a : b, OTHER), 200, 'not limited before the reload');

  const reloads = (): number => a.logs.filter((l) => l.msg === 'tokens reloaded').length;
  writeFileSync(a.configFile, JSON.stringify({ listen: { host: '127.0.0.1', port: a.port }, ...config({ requestsPerMinute: 1 }) }));
  a.child.kill('SIGHUP');
  await eventually(() => reloads() >= 2, 10_000, 'both workers to reload their tokens');
  assert.equal(await statusWith(a, KEPT), 429, 'the staying token kept its count');
  assert.deepEqual([await statusWith(a, OTHER), await statusWith(a, OTHER)], [200, 429], 'the reloaded limit applies');
  assert.equal(await statusWith(b, KEPT), 429, 'the other gateway still shares the count');
});
