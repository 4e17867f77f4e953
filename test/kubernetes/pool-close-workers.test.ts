// poolCloseMs reaches the worker threads: with `workers: 2`, a replica that goes away while a
// stream is in flight on it keeps that stream for the control plane's poolCloseMs (here the test
// tuning's 10 minutes), as with `workers: 1`, instead of a value of the workers' own. The
// Kubernetes endpoint removed mid-stream is the replica going away (draining → stopped at once).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AUTH, rawService, startTestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { FAST, NS, slice, startFakeKube, writeKubeconfig } from '../helpers/kube.js';
import { startReplica } from '../helpers/replica.js';

process.env['NODE_ENV'] = 'test';
process.env['SLUICE_TEST_HOOKS'] = '1';
process.env['SLUICE_TEST_KUBE_TUNING'] = JSON.stringify(FAST);
process.env['SLUICE_TEST_REPLICA_TUNING'] = JSON.stringify({ poolCloseMs: 600_000 });

/** The stream goes on well past the default poolCloseMs (1 s) after its replica is gone. */
const TICKS_AFTER_GONE = 20;
const TICK_MS = 100;

test('workers: 2 — a stream in flight on a replica that is gone lasts the tuned poolCloseMs, not a default of the workers', async (t) => {
  let ticking: NodeJS.Timeout | undefined;
  let release: (() => void) | undefined;
  const replica = await startReplica((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first ');
    // One byte per tick, at most: the stream's pace, not a wait of the test.
    ticking = setInterval(() => res.write('x'), TICK_MS);
    release = () => {
      clearInterval(ticking);
      res.end(' last');
    };
  });
  const api = await startFakeKube();
  api.addDeployment(NS, 'llama', 1);
  const tg = await startTestGateway(
    rawService({ kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig: writeKubeconfig(api.url) }, max: 4 }, { slug: 'llama', queue: { maxWaitMs: 10_000 } }),
    { workers: 2 },
  );
  t.after(async () => {
    clearInterval(ticking);
    // The replica first: a stream still held on a gone replica's pool would hold the gateway's close for poolCloseMs.
    await replica.close();
    await tg.close();
    await api.close();
  });
  const states = (): string[] => tg.logs.filter((l) => l.msg === 'replica state').map((l) => `${String(l.from)}→${String(l.to)} (${String(l.reason)})`);

  api.putEndpointSlice(slice(`llama-${replica.port}`, replica.port, [['127.0.0.1', true, false]]));
  await eventually(() => states().some((x) => x.endsWith('→ready (endpoint ready)')), 10_000, 'the endpoint to be ready');
  const res = await fetch(tg.url('/v1/stream'), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let body = '';
  const more = async (): Promise<boolean> => {
    // A truncated answer ends the caller's connection: fetch's reader rejects (`terminated`).
    const chunk = await reader.read().catch(() => ({ done: true as const, value: undefined }));
    if (chunk.done) return false;
    body += decoder.decode(chunk.value, { stream: true });
    return true;
  };
  while (!body.includes('first ')) assert.ok(await more(), 'the stream began');

  api.deleteEndpointSlice(NS, `llama-${replica.port}`);
  await eventually(() => states().includes('draining→stopped (endpoint removed)'), 10_000, 'the endpoint to be gone');
  const seenAtGone = body.length;
  // At least TICKS_AFTER_GONE × 100 ms after the replica was gone: a pool closed after 1 s has cut it by now.
  while (body.length - seenAtGone < TICKS_AFTER_GONE) {
    assert.ok(await more(), `the stream was cut ${body.length - seenAtGone} bytes after its replica was gone: ${JSON.stringify(body)}`);
  }
  release!();
  while (await more());
  assert.ok(body.endsWith(' last'), `the stream completed: ${JSON.stringify(body)}`);
});
