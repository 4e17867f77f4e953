// A request body that streams in pieces is not sent until a connection to a replica is ready, so
// when the first replica refuses the connection (it never received a byte) the request — head
// and every piece of its body — is retried once on another replica (docs/api.md#errors). The
// same holds for a chunked body held whole (docs/configuration.md#chunked-uploads): it goes to
// the other replica whole, with its Content-Length.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closedPort, readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually, sleep } from '../helpers/wait.js';

let live: TestReplica;
let tg: TestGateway;

before(async () => {
  live = await startReplica(async (req, res) => {
    const body = await readBody(req);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`${req.headers['transfer-encoding'] ?? 'length'}:${body.toString()}`);
  });
  const down = await closedPort();
  const urls = [`http://127.0.0.1:${down}`, live.url];
  tg = await startTestGateway([rawService({ urls }, { uploads: { bufferBytes: 0 } }), rawService({ urls }, { slug: 'held' })]);
});

after(async () => {
  await tg.close();
  await live.close();
});

async function* pieces(n: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < n; i++) {
    yield Buffer.from(`piece${i};`);
    await sleep(10);
  }
}

for (const [slug, framing, what] of [
  ['svc', 'chunked', 'a streamed body'],
  ['held', 'length', 'a chunked body held whole'],
] as const) {
  test(`${what} whose first replica refuses the connection is sent whole to the other replica`, async () => {
    const expected = Array.from({ length: 5 }, (_, i) => `piece${i};`).join('');
    // Until the refusing replica has been tried (and left the rotation), send a streamed request.
    const accessLines = (): Record<string, unknown>[] => tg.logs.filter((l) => l['msg'] === 'request' && l['service'] === slug);
    for (let attempt = 0; attempt < 4; attempt++) {
      const res = await request(tg.url(`/upload-${slug}`, slug), { method: 'POST', headers: AUTH, body: Readable.from(pieces(5)) });
      assert.equal(res.statusCode, 200);
      assert.equal(await res.body.text(), `${framing}:${expected}`);
      // A worker's access line reaches the log a moment after its answer.
      await eventually(() => accessLines().length === attempt + 1, 5_000, 'the access log line');
      if (accessLines().some((l) => l['retried'] === true)) break;
    }
    assert.ok(
      accessLines().some((l) => l['retried'] === true && l['outcome'] === 'ok'),
      'a streamed request was retried after the refused connection, and succeeded',
    );
    assert.equal(live.seen.filter((r) => r.url === `/upload-${slug}`).length, accessLines().length, 'the live replica saw each request once');
  });
}
