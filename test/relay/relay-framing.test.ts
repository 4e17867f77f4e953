// Ambiguous request framing, written byte for byte on raw sockets (docs/api.md#errors,
// docs/architecture.md#fact-7 and #fact-10): a request whose end cannot be known is refused with 400 and
// nothing of it — nor anything pipelined behind it — reaches the replica. RFC 9112 sections 6.1
// and 6.3 also require the connection to be closed after such a request, so every case here
// waits for the gateway to close it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { AUTH, TEST_TOKEN, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { parseResponse, rawExchange, type RawResponse } from '../helpers/raw-http.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';

/** How long the gateway may take to close a refused connection before the test gives up on it. */
const HANG_GUARD_MS = 5_000;

/** Asserts a response is Sluice's own `400 bad_request`: JSON body and `X-Sluice-Error`. */
function assertSluiceBadRequest(response: RawResponse): void {
  assert.equal(response.status, 400);
  assert.deepEqual(response.headers.get('x-sluice-error'), ['bad_request']);
  assert.match(response.headers.get('content-type')?.[0] ?? '', /^application\/json/);
  const body = JSON.parse(response.body.toString('utf8')) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'bad_request');
  assert.equal(typeof body.error.message, 'string');
  assert.equal(response.rest.length, 0, 'nothing after the 400');
}

describe('ambiguous request framing on raw sockets', () => {
  let replica: TestReplica;
  let tg: TestGateway;
  let base: string;
  let controls = 0;
  /** Exceptions thrown out of the gateway's handlers: in production each one would end the process. */
  const uncaught: Error[] = [];
  const onUncaught = (err: Error): void => {
    uncaught.push(err);
  };

  before(async () => {
    process.on('uncaughtException', onUncaught);
    replica = await startReplica(async (req, res) => {
      const body = await readBody(req);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ url: req.url, bytes: body.length }));
    });
    tg = await startTestGateway(rawService({ urls: [replica.url] }));
    base = new URL(tg.url('/')).pathname.slice(0, -1); // `/api/v1/services/svc/request`
  });

  after(async () => {
    process.off('uncaughtException', onUncaught);
    await tg?.close();
    await replica?.close();
  });

  /** A valid request line and headers for `path`, authenticated, without framing headers. */
  function head(path: string): string {
    return `POST ${base}${path} HTTP/1.1\r\nHost: 127.0.0.1:${tg.port}\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Type: application/json\r\n`;
  }

  /**
   * Sends a well-formed request on a fresh connection, after the case under test has finished,
   * and asserts that it is the only request the replica received since `seenBefore`. A refused
   * request would have been dispatched from inside the gateway's handler for the earlier
   * connection, so it would reach the replica before this control does.
   */
  async function assertOnlyControlReachedReplica(seenBefore: number): Promise<void> {
    controls += 1;
    const path = `/control-${controls}`;
    const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body: '{}' });
    assert.equal(res.statusCode, 200, 'the gateway still serves');
    await res.body.text();
    assert.deepEqual(
      replica.seen.slice(seenBefore).map((r) => r.url),
      [path],
      'the replica received nothing but the control request',
    );
  }

  function assertNoUncaught(uncaughtBefore: number): void {
    assert.deepEqual(
      uncaught.slice(uncaughtBefore).map((e) => e.message),
      [],
      'the gateway threw from its request handler (outside a test runner the process would exit)',
    );
  }

  for (const [label, lengths] of [
    ['the first value is the real length', ['2', '40']],
    ['the last value is the real length', ['40', '2']],
  ] as const) {
    test(`two different Content-Length headers with a request pipelined behind (${label}): nothing reaches the replica`, async () => {
      const seenBefore = replica.seen.length;
      const uncaughtBefore = uncaught.length;
      const logsBefore = tg.logs.length;
      const smuggled = `${head('/smuggled')}Content-Length: 2\r\n\r\n{}`;
      const first = `${head('/first')}Content-Length: ${lengths[0]}\r\nContent-Length: ${lengths[1]}\r\n\r\n{}`;
      const { bytes, closedByGateway, error } = await rawExchange(tg.port, first + smuggled, HANG_GUARD_MS);
      const text = bytes.toString('latin1');
      console.log(`different Content-Length values (${label}): caller saw ${JSON.stringify(text.split('\r\n')[0] || `a closed connection (${error ?? 'FIN'})`)}`);

      await assertOnlyControlReachedReplica(seenBefore);
      assert.ok(!tg.logs.slice(logsBefore).some((line) => line['path'] === '/smuggled' || line['path'] === '/first'), 'no relayed request was logged');
      // A 400, or a closed connection. When the bytes after the shorter body do not parse, uWS
      // may answer them itself (an error status without Sluice's JSON) before closing: also fine.
      // Never a second answer, never a success.
      assert.doesNotMatch(text, /HTTP\/1\.1 [123]\d\d/, 'no success answer to either request');
      if (bytes.length > 0) {
        const response = parseResponse(bytes);
        if (response.headers.has('x-sluice-error')) assertSluiceBadRequest(response);
        else assert.ok(response.status >= 400, `an error status from uWS itself, got ${response.status}`);
        assert.doesNotMatch(response.rest.toString('latin1'), /HTTP\/1\.1/, 'a single answer');
      }
      assert.ok(closedByGateway, `the gateway closed the connection (RFC 9112 section 6.3); it was still open after ${HANG_GUARD_MS} ms`);
      assertNoUncaught(uncaughtBefore);
    });
  }

  test('Transfer-Encoding: gzip, chunked is 400 bad_request and nothing reaches the replica', async () => {
    const seenBefore = replica.seen.length;
    const uncaughtBefore = uncaught.length;
    const { bytes, closedByGateway } = await rawExchange(tg.port, `${head('/gzip-chunked')}Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`);
    await assertOnlyControlReachedReplica(seenBefore);
    assertSluiceBadRequest(parseResponse(bytes));
    assert.ok(closedByGateway, 'the gateway closed the connection (RFC 9112 section 6.3)');
    assertNoUncaught(uncaughtBefore);
  });

  test('two identical Content-Length headers are 400 bad_request and nothing reaches the replica', async () => {
    const seenBefore = replica.seen.length;
    const uncaughtBefore = uncaught.length;
    const { bytes, closedByGateway } = await rawExchange(tg.port, `${head('/same-length')}Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}`);
    await assertOnlyControlReachedReplica(seenBefore);
    assertSluiceBadRequest(parseResponse(bytes));
    assert.ok(closedByGateway, 'the gateway closed the connection (RFC 9112 section 6.3)');
    assertNoUncaught(uncaughtBefore);
  });

  test('Content-Length with Transfer-Encoding: chunked is 400 and nothing reaches the replica', async () => {
    const seenBefore = replica.seen.length;
    const uncaughtBefore = uncaught.length;
    const { bytes, closedByGateway } = await rawExchange(
      tg.port,
      `${head('/length-and-chunked')}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    );
    await assertOnlyControlReachedReplica(seenBefore);
    // uWS may refuse this one itself, without Sluice's JSON body: any 400 will do.
    assert.equal(parseResponse(bytes).status, 400);
    assert.ok(closedByGateway, 'the gateway closed the connection (RFC 9112 section 6.1)');
    assertNoUncaught(uncaughtBefore);
  });
});
