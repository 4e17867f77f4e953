// `sluice serve` with workers: 2 and SIGHUP (docs/configuration.md#reloading-sighup): the limits
// are reloaded with the tokens, a token that stays keeps what it has used on every worker, a
// service's new `limits` reach the tokens without their own (with the shared store:
// limits-store-sighup.test.ts).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { type CliGateway, connectionsOnEveryWorker, startCliGateway, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const KEPT = 'slc_token_kept_across_the_reload_3333333333333333333';
const OTHER = 'slc_token_limited_by_its_service_44444444444444444444';

let gw: CliGateway | undefined;
let replica: TestReplica | undefined;
const open: WorkerConnection[] = [];

after(async () => {
  for (const c of open) await c.client.close();
  if (gw !== undefined && gw.child.exitCode === null) gw.child.kill('SIGKILL');
  await replica?.close();
});

function config(serviceLimits: Record<string, unknown> | undefined, top: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    workers: 2,
    ...top,
    services: [
      {
        slug: 'svc',
        ...(serviceLimits === undefined ? {} : { limits: serviceLimits }),
        tokens: [
          { name: 'kept', sha256: sha256Hex(KEPT), limits: { requestsPerMinute: 2 } },
          { name: 'other', sha256: sha256Hex(OTHER) },
        ],
        replicas: { urls: [replica!.url] },
      },
    ],
  };
}

async function statusWith(c: WorkerConnection, token: string): Promise<number> {
  const res = await c.client.request({ path: '/api/v1/services/svc/request/x', method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
  await res.body.dump();
  return res.statusCode;
}

test('workers: 2 — SIGHUP reloads limits with the tokens and keeps what a staying token used', async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('{}');
  });
  gw = await startCliGateway(config(undefined));
  const [w0, w1] = (await connectionsOnEveryWorker(gw, gw.origin, 2, 1)).map((list) => list[0]!);
  open.push(w0!, w1!);
  assert.deepEqual([await statusWith(w0!, KEPT), await statusWith(w1!, KEPT), await statusWith(w0!, KEPT), await statusWith(w1!, KEPT)], [200, 200, 429, 429]);
  for (let i = 0; i < 3; i++) assert.equal(await statusWith(i % 2 === 0 ? w0! : w1!, OTHER), 200, 'not limited before the reload');

  const { port } = gw;
  const reloads = (): number => gw!.logs.filter((l) => l.msg === 'tokens reloaded').length;
  writeFileSync(gw.configFile, JSON.stringify({ listen: { host: '127.0.0.1', port }, ...config({ requestsPerMinute: 1 }) }));
  gw.child.kill('SIGHUP');
  await eventually(() => reloads() >= 2, 10_000, 'both workers to reload their tokens');
  assert.equal(await statusWith(w1!, KEPT), 429, 'the staying token kept its count');
  assert.deepEqual([await statusWith(w0!, OTHER), await statusWith(w1!, OTHER)], [200, 429], "the service's new limits apply to the token without its own");
});
