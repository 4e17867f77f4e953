// A fourth kind of replicas, registered by the test alone (docs/architecture.md#adding-a-replica-kind):
// "a fixed list from the test" holds its replicas `starting` until demand reaches it, then lets
// them be ready, and says that a cold service queues. The real gateway, with one data plane and
// with two worker threads, relays through it: a request that will not wait gets its 503 at once
// and wakes the cold service (the workers know to wake it from the kind's answer in WorkerInit,
// not from the config, whose `urls` point at a closed port), and a request that waits is served
// by the kind's replica; /status names the kind.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { REPLICA_KINDS } from '../../src/control/kinds/kinds.js';
import type { ReplicaKind } from '../../src/control/service/kind-policy.js';
import type { ManagedReplica } from '../../src/control/service/replica.js';
import type { Endpoint } from '../../src/control/sources/source.js';
import { AUTH, rawService, startTestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { closedPort, readBody, startReplica } from '../helpers/replica.js';

/** Replicas at the endpoints the test lists, `starting` until a request wants one. */
function fixedList(endpoints: readonly Endpoint[]): ReplicaKind {
  return {
    name: 'fixed-list',
    configured: (service) => service.slug === 'fixed',
    slotCapacity: () => endpoints.length,
    policy: (_service, host) => {
      const listed: ManagedReplica[] = [];
      return {
        queuesForColdStart: true,
        probesWhenReady: false,
        panicFallback: false,
        start() {
          for (const endpoint of endpoints) {
            const r = host.create();
            assert.ok(r !== undefined, 'a slot per endpoint');
            host.place(r, endpoint);
            listed.push(r);
          }
        },
        demandChanged() {
          if (host.demanded === 0) return;
          for (const r of listed) if (r.state === 'starting') host.transition(r, 'ready', 'wanted');
        },
        entered(r, _from, to) {
          if (to === 'draining') host.transition(r, 'stopped', 'nothing to stop');
          else if (to === 'failed') host.forget(r);
        },
        heldOut: () => false,
        pid: () => undefined,
        drain() {},
        async close() {},
      };
    },
  };
}

for (const workers of [1, 2]) {
  test(`workers: ${workers}: a kind registered by a test alone: a request that will not wait wakes the cold service, which then relays through the kind's replica`, async () => {
    const replica = await startReplica(async (req, res) => {
      const body = await readBody(req);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`fixed:${body.toString()}`);
    });
    const closed = await closedPort();
    const port = Number(new URL(replica.url).port);
    REPLICA_KINDS.unshift(fixedList([{ origin: `http://127.0.0.1:${port}`, host: `127.0.0.1:${port}`, probeHost: '127.0.0.1', probePort: port }]));
    let tg;
    try {
      tg = await startTestGateway(rawService({ urls: [`http://127.0.0.1:${closed}`] }, { slug: 'fixed' }), { workers, admin: { host: '127.0.0.1', port: 0 } });
    } finally {
      REPLICA_KINDS.shift();
    }
    try {
      const status = (await (await fetch(`http://127.0.0.1:${tg.gateway.adminPort}/status`)).json()) as { services: { slug: string; kind: string }[] };
      assert.equal(status.services.find((s) => s.slug === 'fixed')?.kind, 'fixed-list');

      const now = await request(tg.url('/x', 'fixed'), { method: 'POST', headers: { ...AUTH, 'x-sluice-max-wait-ms': '0' }, body: 'now' });
      assert.equal(now.statusCode, 503, 'a request that will not wait on a cold service');
      await now.body.dump();
      await eventually(() => tg.logs.some((l) => l['msg'] === 'replica state' && l['reason'] === 'wanted'), 10_000, 'the wake to reach the kind');

      const res = await request(tg.url('/x', 'fixed'), { method: 'POST', headers: AUTH, body: 'then' });
      assert.equal(res.statusCode, 200);
      assert.equal(await res.body.text(), 'fixed:then');
      assert.equal(replica.seen.length, 1, 'the request reached the kind’s replica, not the configured URL');
    } finally {
      await tg.close();
      await replica.close();
    }
  });
}
