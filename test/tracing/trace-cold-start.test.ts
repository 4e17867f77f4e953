// A request that waited on a cold start, as its trace shows it (docs/operations.md#traces): a
// queue span (priority, place, granted) and under it the cold start it waited on — how long it
// waited, and, once a start has been measured, how long the start was expected to take.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { recordFile } from '../helpers/launched.js';
import { childrenOf, KIND, type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { eventually } from '../helpers/wait.js';
import { GATE_REPLICA } from '../helpers/workers.js';

let receiver: OtlpReceiver;
let tg: TestGateway;
const gate = recordFile();

before(async () => {
  receiver = await startOtlpReceiver();
  tg = await startTestGateway(
    rawService({ command: [process.execPath, GATE_REPLICA], env: { HEALTH_GATE_FILE: gate }, readyPath: '/health', max: 1, idleTimeoutMs: 1000 }),
    { workers: 1, tracing: { endpoint: receiver.url } },
  );
});

after(async () => {
  await tg.close();
  await receiver.close();
});

async function treeOf(requestId: string): Promise<{ root: ReceivedSpan; spans: ReceivedSpan[] }> {
  const isIt = (s: ReceivedSpan): boolean => s.kind === KIND.server && s.attributes['sluice.request.id'] === requestId;
  await receiver.waitFor((spans) => spans.some(isIt));
  const root = receiver.spans.find(isIt)!;
  return { root, spans: receiver.spans.filter((s) => s.traceId === root.traceId) };
}

test('a request that waited on a cold start: queue and cold start spans, then the replica; the next cold start says what was expected', async () => {
  const answer = request(tg.url('/echo'), { method: 'POST', headers: AUTH, body: 'x' });
  await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}')) === 1, 10_000, 'the request queued');
  writeFileSync(gate, 'ready');
  const res = await answer;
  assert.equal(res.statusCode, 200);
  await res.body.dump();
  const { root, spans } = await treeOf(String(res.headers['x-request-id']));
  const children = childrenOf(spans, root);
  const queue = children.find((c) => c.name === 'queue')!;
  assert.ok(queue !== undefined, `a queue span among ${children.map((c) => c.name).join(', ')}`);
  assert.equal(queue.attributes['sluice.queue.priority'], 0);
  assert.equal(queue.attributes['sluice.queue.ahead'], 0);
  assert.equal(queue.attributes['sluice.queue.exit'], 'granted');
  const [cold] = childrenOf(spans, queue);
  assert.equal(cold!.name, 'cold start');
  assert.ok(Number(cold!.attributes['sluice.cold_start.waited_ms']) > 0);
  assert.equal(cold!.attributes['sluice.cold_start.expected_ms'], undefined, 'the first start: nothing measured to expect');
  const client = children.find((c) => c.kind === KIND.client)!;
  assert.ok(client.startNs >= queue.endNs, 'the replica is asked once the queue granted it');

  // The replica stops when idle; the next request waits on a start whose length is now known.
  await eventually(async () => (await metric(tg, 'sluice_replicas{service="svc",state="ready"}')) === 0, 20_000, 'the idle replica stopped');
  const again = await request(tg.url('/echo'), { method: 'POST', headers: AUTH, body: 'x' });
  assert.equal(again.statusCode, 200);
  await again.body.dump();
  const second = await treeOf(String(again.headers['x-request-id']));
  const secondQueue = childrenOf(second.spans, second.root).find((c) => c.name === 'queue')!;
  const [secondCold] = childrenOf(second.spans, secondQueue);
  assert.equal(typeof secondCold!.attributes['sluice.cold_start.expected_ms'], 'number');
});
