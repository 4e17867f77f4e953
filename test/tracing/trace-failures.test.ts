// The span tree of the requests that do not simply succeed (docs/operations.md#traces): one
// refused by its token's limits (429: an admission span naming the limit), one retried after the
// first replica refused the connection (two CLIENT spans, the first failed, the second retried),
// and one whose caller left in the middle of a stream (`error.type` client_closed, no status sent).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, logged, rawService, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { closedPort, readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { childrenOf, KIND, type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { eventually } from '../helpers/wait.js';

let live: TestReplica;
let receiver: OtlpReceiver;
let tg: TestGateway;
/** Streams of the `/slow` answers, ended by the test. */
const open: (() => void)[] = [];

before(async () => {
  live = await startReplica(async (req, res) => {
    await readBody(req);
    if (req.url === '/slow') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"model":"m","choices":[]}\n\n');
      await new Promise<void>((resolve) => {
        open.push(resolve);
        res.on('close', resolve);
      });
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  receiver = await startOtlpReceiver();
  const down = await closedPort();
  tg = await startTestGateway(
    [
      rawService({ urls: [live.url] }),
      rawService({ urls: [live.url] }, { slug: 'limited', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256, limits: { requestsPerMinute: 1 } }] }),
      rawService({ urls: [`http://127.0.0.1:${down}`, live.url] }, { slug: 'retrying' }),
    ],
    { tracing: { endpoint: receiver.url } },
  );
});

after(async () => {
  for (const end of open) end();
  await tg.close();
  await live.close();
  await receiver.close();
});

function server(where: (s: ReceivedSpan) => boolean): ReceivedSpan | undefined {
  return receiver.spans.find((s) => s.kind === KIND.server && where(s));
}

test('a request refused by its token limits: SERVER span 429 rate_limited, with an admission span naming the limit', async () => {
  const first = await request(tg.url('/v1/a', 'limited'), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(first.statusCode, 200);
  await first.body.dump();
  const refused = await request(tg.url('/v1/a', 'limited'), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(refused.statusCode, 429);
  await refused.body.dump();
  await receiver.waitFor(() => server((s) => s.attributes['error.type'] === 'rate_limited') !== undefined);
  const root = server((s) => s.attributes['error.type'] === 'rate_limited')!;
  assert.equal(root.attributes['http.response.status_code'], 429);
  assert.equal(root.attributes['sluice.service'], 'limited');
  const children = childrenOf(receiver.spans, root);
  assert.deepEqual(
    children.map((c) => c.name),
    ['admission'],
    'refused before any replica: no CLIENT span',
  );
  assert.equal(children[0]!.attributes['sluice.limit'], 'requestsPerMinute');
  assert.equal(children[0]!.attributes['error.type'], 'rate_limited');
  // The admitted request of the limited token has its admission too, without a refusal.
  await receiver.waitFor(() => server((s) => s.attributes['sluice.request.id'] === first.headers['x-request-id']) !== undefined);
  const admitted = server((s) => s.attributes['sluice.request.id'] === first.headers['x-request-id'])!;
  const names = childrenOf(receiver.spans, admitted).map((c) => c.name);
  assert.ok(names.includes('admission') && names.length === 2, `admission and the replica's CLIENT span: ${names.join(', ')}`);
});

test('a request retried after the first replica refused the connection: two CLIENT spans, the second marked retried', async () => {
  const lines = (): Record<string, unknown>[] => logged(tg, 'request').filter((l) => l['service'] === 'retrying');
  for (let i = 0; i < 4 && !lines().some((l) => l['retried'] === true); i++) {
    const res = await request(tg.url('/v1/r', 'retrying'), { method: 'POST', headers: AUTH, body: '{}' });
    assert.equal(res.statusCode, 200);
    await res.body.dump();
    await eventually(() => lines().length === i + 1, 5_000, 'the access line');
  }
  const retried = lines().find((l) => l['retried'] === true);
  assert.ok(retried !== undefined, 'one request was retried');
  await receiver.waitFor(() => server((s) => s.attributes['sluice.request.id'] === retried['reqId']) !== undefined);
  const root = server((s) => s.attributes['sluice.request.id'] === retried['reqId'])!;
  assert.equal(root.attributes['http.response.status_code'], 200);
  const clients = childrenOf(receiver.spans, root)
    .filter((c) => c.kind === KIND.client)
    .sort((a, b) => Number(a.startNs - b.startNs));
  assert.equal(clients.length, 2);
  assert.equal(clients[0]!.attributes['sluice.retried'], false);
  assert.equal(clients[0]!.attributes['error.type'], 'upstream_unavailable');
  assert.equal(clients[0]!.status, 2);
  assert.equal(clients[1]!.attributes['sluice.retried'], true);
  assert.equal(clients[1]!.attributes['server.port'], Number(new URL(live.url).port));
  assert.equal(clients[1]!.attributes['http.response.status_code'], 200);
  assert.ok(clients[0]!.endNs <= clients[1]!.startNs, 'the retry starts after the first try ended');
});

test('a caller that leaves in the middle of a stream: error.type client_closed, no status code, the replica answered', async () => {
  const url = new URL(tg.url('/slow'));
  const socket = connect(Number(url.port), '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`POST ${url.pathname} HTTP/1.1\r\nhost: x\r\nauthorization: ${AUTH.authorization}\r\ncontent-length: 2\r\n\r\n{}`);
  // The first event reached the caller: the stream is under way.
  let seen = '';
  while (!seen.includes('data:')) seen += ((await once(socket, 'data')) as [Buffer])[0].toString();
  socket.destroy();
  await receiver.waitFor(() => server((s) => s.attributes['error.type'] === 'client_closed') !== undefined);
  const root = server((s) => s.attributes['error.type'] === 'client_closed')!;
  assert.equal(root.attributes['http.response.status_code'], undefined);
  assert.equal(root.status, 0, "a caller leaving is not the server's error");
  assert.deepEqual(
    root.events.map((e) => e.name),
    ['first token', 'last token'],
  );
  const [client] = childrenOf(receiver.spans, root);
  assert.equal(client!.attributes['http.response.status_code'], 200);
});
