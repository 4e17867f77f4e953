// A router's request whose token's limits live in the shared store (docs/api.md#routers,
// docs/configuration.md#sharing-limits-across-gateways), black-box: a real redis-server, a service
// of two replicas behind a router whose token has `requestsPerMinute` (each request asks the store:
// a share of 1) or `concurrent`. The request waits for the store while the router holds its body;
// it is started once, when both are done: each request reaches one replica once, is logged once,
// and at the end nothing is left in flight, of the replicas' slots or of the token's places.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { sha256Hex } from '../../src/cli/token.js';
import { secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { REDIS_SKIP, startRedis, type TestRedis } from '../helpers/redis.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const ROUTER_TOKEN = secret('slc_router_token_behind_the_shared_store_01234567');
const agent = new Agent({ connections: 8, headersTimeout: 20_000 });

interface Status {
  services: { slug: string; inflight: number }[];
  routers: { slug: string; limits: { token: string; concurrent?: { used: number } }[] }[];
}

describe('a router behind the shared store', { skip: REDIS_SKIP }, () => {
  let redis: TestRedis;
  const replicas: TestReplica[] = [];
  /** Requests each replica received, by request id. */
  const got: string[][] = [[], []];
  const gateways: TestGateway[] = [];

  before(async () => {
    redis = await startRedis();
    for (const i of [0, 1]) {
      replicas.push(
        await startReplica(async (req, res) => {
          await readBody(req);
          got[i]!.push(String(req.headers['x-request-id']));
          res.setHeader('content-type', 'application/json');
          res.end('{"ok":true}');
        }),
      );
    }
  });

  after(async () => {
    for (const tg of gateways) await tg.close();
    await agent.close();
    for (const r of replicas) await r.close();
    await redis?.close();
  });

  async function gateway(limits: Record<string, unknown>, prefix: string): Promise<TestGateway> {
    const tg = await startTestGateway(
      [{ slug: 'svc', tokens: [{ name: 'svc-caller', sha256: TEST_TOKEN_SHA256 }], models: ['m'], replicas: { urls: replicas.map((r) => r.url) } }],
      {
        routers: [{ slug: 'r', tokens: [{ name: 'caller', sha256: sha256Hex(ROUTER_TOKEN), limits }] }],
        limits: { store: redis.url, prefix, onStoreDown: 'refuse' },
        admin: { host: '127.0.0.1', port: 0 },
      },
    );
    gateways.push(tg);
    await eventually(() => tg.logs.some((l) => l.msg === 'limit store reachable'), 10_000, 'the gateway to reach the store');
    return tg;
  }

  /** A request the store decided on (one that waited past its 50 ms on a busy machine gets 503 and used nothing: sent again). */
  async function decided(tg: TestGateway): Promise<{ status: number; id: string; text: string }> {
    for (let i = 0; ; i++) {
      const res = await request(tg.url('/v1/completions', 'r'), {
        method: 'POST',
        headers: { authorization: `Bearer ${ROUTER_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', prompt: 'hi' }),
        dispatcher: agent,
      });
      const text = await res.body.text();
      if (res.statusCode !== 503 || i >= 20) return { status: res.statusCode, id: String(res.headers['x-request-id']), text };
    }
  }

  async function status(tg: TestGateway): Promise<Status> {
    return (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort!}/status`)).json()) as Status;
  }

  for (const [what, limits] of [
    ['requestsPerMinute', { requestsPerMinute: 60 }],
    ['concurrent', { concurrent: 1 }],
  ] as const) {
    test(`${what}: each request waits for the store and reaches one replica once; nothing is left in flight`, async () => {
      const tg = await gateway(limits, `${what}:`);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        const a = await decided(tg);
        assert.equal(a.status, 200, `request ${i + 1}: ${a.text}`);
        ids.push(a.id);
        // The gateway may end a request (its place back) a moment after the caller has its last byte.
        await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === a.id), 10_000, `the access line of request ${i + 1}`);
      }
      const reached = [...got[0]!, ...got[1]!].filter((id) => ids.includes(id));
      assert.deepEqual(reached.sort(), [...ids].sort(), 'each request reached one replica, once');
      await eventually(() => tg.logs.filter((l) => l.msg === 'request' && ids.includes(String(l.reqId))).length >= ids.length, 10_000, 'the access lines');
      assert.equal(tg.logs.filter((l) => l.msg === 'request' && ids.includes(String(l.reqId))).length, ids.length, 'each request logged once');
      await eventually(async () => {
        const s = await status(tg);
        return s.services[0]!.inflight === 0 && (s.routers[0]!.limits[0]!.concurrent?.used ?? 0) === 0;
      }, 10_000, 'nothing left in flight: replicas and places');
      const s = await status(tg);
      assert.equal(s.services[0]!.inflight, 0);
      if (what === 'concurrent') assert.equal(s.routers[0]!.limits[0]!.concurrent!.used, 0);
    });
  }
});
