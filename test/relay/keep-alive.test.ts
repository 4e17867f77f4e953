// Kept alive while waiting (`queue.keepAliveMs`), with a replica that takes its time to answer: a
// request for a streamed answer gets `200 text/event-stream` and a comment every keepAliveMs,
// then the replica's events, or one `event: error` for anything else (the replica's error, a
// non-stream answer, Sluice's own error) and a clean end. The replica's deadlines are not
// stretched by the comments; requests answered in time, and requests that did not ask for a
// stream, are relayed byte for byte as without the option. With one data plane thread and two.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/raw-http.js';
import { errorEvent, readStream, WAITING, waitingComments } from '../helpers/sse-client.js';
import { type SseReplica, startSseReplica, type StreamScript } from '../helpers/sse-replica.js';
import { eventually } from '../helpers/wait.js';

const KEEP_ALIVE_MS = 200;
const PATIENT_KEEP_ALIVE_MS = 10_000;

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/**
 * Service `on` keeps requests alive, `off` does not; `patient` keeps them alive after a long
 * keepAliveMs (a replica that answers well within it on a busy machine too). All three relay to
 * the same scripted replica.
 */
async function setup(workers: number, service: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<{ tg: TestGateway; replica: SseReplica }> {
  const replica = await startSseReplica();
  const on = rawService({ urls: [replica.url] }, { slug: 'on', ...service, queue: { keepAliveMs: KEEP_ALIVE_MS } });
  const off = rawService({ urls: [replica.url] }, { slug: 'off', ...service });
  const patient = rawService({ urls: [replica.url] }, { slug: 'patient', ...service, queue: { keepAliveMs: PATIENT_KEEP_ALIVE_MS } });
  const tg = await startTestGateway([on, off, patient], { workers, ...extra });
  cleanups.push(async () => {
    await tg.close();
    await replica.close();
  });
  return { tg, replica };
}

/** A request body asking for a stream (`"stream": true`), carrying the replica's script. */
function asking(script: StreamScript, stream: unknown = true): string {
  return JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream, ...script });
}

async function accessLine(tg: TestGateway, id: string): Promise<Record<string, unknown>> {
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
  return tg.logs.find((l) => l.msg === 'request' && l.reqId === id)!;
}

/** When (ms after sending) the caller read the chunk that completed the first `text`. */
function firstChunkWith(read: { chunks: { at: number; text: string }[] }, text: string): number {
  let soFar = '';
  for (const chunk of read.chunks) {
    soFar += chunk.text;
    if (soFar.includes(text)) return chunk.at;
  }
  throw new Error(`no ${JSON.stringify(text)} in the answer`);
}

const EVENTS = 'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: {"choices":[{"delta":{"content":"!"}}]}\n\ndata: [DONE]\n\n';

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 60_000 }, () => {
    test('a request for a stream still waiting after keepAliveMs: 200 event-stream, a comment every keepAliveMs, then the replica\'s events', async () => {
      const { tg } = await setup(workers);
      const script: StreamScript = { headDelayMs: 1_000, pieces: [[0, EVENTS]] };
      // Asked by the body (`"stream": true`), and by the Accept header (the body says nothing).
      const byBody = readStream(tg.url('/v1/chat/completions', 'on'), asking(script));
      const byAccept = readStream(tg.url('/v1/chat/completions', 'on'), JSON.stringify(script), { accept: 'application/json, text/event-stream' });
      for (const read of await Promise.all([byBody, byAccept])) {
        assert.equal(read.status, 200);
        assert.equal(read.headers['content-type'], 'text/event-stream');
        assert.equal(read.ending, 'clean');
        const comments = waitingComments(read);
        assert.ok(comments.length >= 1, `comments while the replica took 1 s: ${comments.length}`);
        assert.equal(read.text, WAITING.repeat(comments.length) + EVENTS, 'comments, then the replica\'s events as they were');
        assert.ok(comments[0]! >= KEEP_ALIVE_MS - 20, `the first comment after keepAliveMs: ${comments[0]} ms`);
        // No more often than every keepAliveMs, counted against the whole wait (on a busy machine
        // the caller may read several comments at once, so not gap by gap): the n-th comment was
        // sent at least n keepAliveMs (less the clock's step) after the request came, and before
        // the first event, which the caller read after that.
        const eventsAt = firstChunkWith(read, 'data: ');
        assert.ok(comments.length * (KEEP_ALIVE_MS - 60) <= eventsAt, `${comments.length} comments in the ${eventsAt} ms before the first event: ${comments.join(', ')}`);
        const line = await accessLine(tg, read.id);
        assert.equal(line.status, 200);
        assert.equal(line.outcome, 'ok');
        assert.equal(line.keptAlive, true);
        assert.equal(line.events, 3);
        assert.ok(Number(line.ttfbMs) >= 950, `time to first byte is the replica's answer, not the first comment: ${String(line.ttfbMs)}`);
        assert.equal(line.bytesOut, Buffer.byteLength(read.text), 'every byte written to the caller: the comments and the replica\'s events');
      }
      assert.equal(await metric(tg, 'sluice_requests_total{service="on",status="200",outcome="ok"}'), 2);
      assert.equal(await metric(tg, 'sluice_stream_events_total{service="on"}'), 6);
    });

    test('answered within keepAliveMs, or not asking for a stream: the bytes a service without the option sends', async () => {
      const { tg } = await setup(workers);
      // [name, body, headers, the service that keeps alive]
      const cases: [string, string, Record<string, string>, string?][] = [
        ['a stream answered at once', asking({ pieces: [[0, 'data: a\n\n'], [50, 'data: b\n\n']] }), {}],
        // Not "just before": how late the gateway sees a head on a busy machine is not the test's to fix.
        ['a stream answered after a while, within keepAliveMs', asking({ headDelayMs: 500, pieces: [[0, EVENTS]] }), {}, 'patient'],
        ['a slow JSON answer to a request that did not ask', asking({ headDelayMs: 700, status: 201, contentType: 'application/json', withLength: true, pieces: [[0, '{"id":"x"}']] }, false), {}],
        ['a slow stream to a request without "stream": true', JSON.stringify({ headDelayMs: 700, pieces: [[0, EVENTS]] }), { accept: '*/*' }],
        ['"stream": true nested, not at the top level', JSON.stringify({ options: { stream: true }, headDelayMs: 700, status: 500, contentType: 'text/plain', pieces: [[0, 'boom']] }), {}],
        ['Accept with text/event-stream;q=0', JSON.stringify({ headDelayMs: 700, pieces: [[0, EVENTS]] }), { accept: 'text/event-stream;q=0' }],
        // An explicit "stream": false wins over an Accept that names both types, as MCP clients send it.
        ['a slow JSON answer to "stream": false with Accept: application/json, text/event-stream', asking({ headDelayMs: 700, contentType: 'application/json', withLength: true, pieces: [[0, '{"id":"x","choices":[]}']] }, false), { accept: 'application/json, text/event-stream' }],
        ['a slow JSON error to "stream": false with Accept: text/event-stream', asking({ headDelayMs: 700, status: 500, contentType: 'application/json', withLength: true, pieces: [[0, '{"error":"boom"}']] }, false), { accept: 'text/event-stream' }],
      ];
      for (const [name, body, headers, keeping = 'on'] of cases) {
        const wire = async (slug: string): Promise<string> => {
          const path = new URL(tg.url('/v1/chat/completions', slug)).pathname;
          const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
          const head = `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
          const exchange = await rawExchange(tg.port, Buffer.concat([Buffer.from(head, 'latin1'), Buffer.from(body)]), 10_000);
          assert.ok(exchange.closedByGateway, `${name}: the answer ended`);
          // The same but for the request id, the date, and the comment chunk that carries a head that
          // came alone (a matter of reads: docs/api.md#when-the-status-line-goes-out).
          return exchange.bytes
            .toString('latin1')
            .replace(/\r\nx-request-id: [^\r]*/i, '')
            .replace(/\r\ndate: [^\r]*/i, '')
            .replace('\r\n\r\n2\r\n:\n\r\n', '\r\n\r\n');
        };
        const [on, off] = await Promise.all([wire(keeping), wire('off')]);
        assert.equal(on, off, name);
        assert.ok(!on.includes(WAITING), `${name}: no comment`);
      }
      const lines = (): Record<string, unknown>[] => tg.logs.filter((l) => l.msg === 'request' && (l.service === 'on' || l.service === 'patient'));
      await eventually(() => lines().length === cases.length, 5_000, 'every access line');
      for (const line of lines()) assert.equal(line.keptAlive, undefined);
    });

    test('after the comments, a replica answer that cannot follow them is one error event with its status and body (4xx, 5xx, a non-stream 200, a body over 4 KiB)', async () => {
      const { tg, replica } = await setup(workers);
      const big = `${'x'.repeat(4095)}\u00e9${'y'.repeat(2000)}`; // é straddles the 4 KiB cut: left out whole
      const cases: [string, StreamScript, number, string][] = [
        ['a 404', { headDelayMs: 500, status: 404, contentType: 'application/json', withLength: true, pieces: [[0, '{"detail":"no such model"}']] }, 404, '{"detail":"no such model"}'],
        ['a 500, chunked, in pieces', { headDelayMs: 500, status: 500, contentType: 'text/plain', pieces: [[0, 'internal '], [30, 'error \u2603']] }, 500, 'internal error \u2603'],
        ['a 429 event stream', { headDelayMs: 500, status: 429, pieces: [[0, 'data: {"error":"busy"}\n\n']] }, 429, 'data: {"error":"busy"}\n\n'],
        ['a non-stream 200', { headDelayMs: 500, status: 200, contentType: 'application/json', withLength: true, pieces: [[0, '{"choices":[]}']] }, 200, '{"choices":[]}'],
        ['an empty 503', { headDelayMs: 500, status: 503, contentType: 'text/plain', withLength: true, pieces: [] }, 503, ''],
        ['a body over 4 KiB that never ends', { headDelayMs: 500, status: 500, contentType: 'text/plain', pieces: [[0, big]], end: 'hang' }, 500, 'x'.repeat(4095)],
      ];
      for (const [name, script, status, message] of cases) {
        const read = await readStream(tg.url('/v1/chat/completions', 'on'), asking(script));
        assert.equal(read.status, 200, name);
        assert.equal(read.ending, 'clean', `${name}: a clean end`);
        assert.ok(waitingComments(read).length >= 1, `${name}: kept alive first`);
        assert.ok(read.text.startsWith(WAITING), name);
        assert.ok(read.text.endsWith('\n\n'), name);
        const event = errorEvent(read.text);
        assert.equal(event?.error.message.length, message.length, `${name}: the message's length`);
        assert.deepEqual(event, { error: { code: 'upstream_status', status, message } }, name);
        assert.equal(read.text.replaceAll(WAITING, '').split('\n\n').length, 2, `${name}: nothing but comments and the error event`);
        const line = await accessLine(tg, read.id);
        assert.equal(line.status, status, `${name}: the access line has the replica's status`);
        assert.equal(line.outcome, 'ok', name);
        assert.equal(line.keptAlive, true, name);
        assert.equal(line.events, undefined, `${name}: no stream was relayed`);
        assert.equal(line.bytesOut, Buffer.byteLength(read.text), `${name}: bytesOut counts the comments and the error event`);
        assert.ok(Number(line.ttfbMs) >= 450, name);
      }
      for (const status of [404, 500, 429, 200, 503]) {
        assert.equal(await metric(tg, `sluice_requests_total{service="on",status="${status}",outcome="ok"}`), status === 500 ? 2 : 1, `counted under ${status}`);
      }
      // The answer that never ended was not read to its end: its exchange was closed.
      await eventually(() => replica.abandoned >= 1, 5_000, 'the endless answer abandoned');
    });

    test('Sluice\'s own errors after the comments: no head within responseHeadersMs (the comments do not stretch it) and a reset before the head', async () => {
      const { tg } = await setup(workers, { timeouts: { responseHeadersMs: 700 } });
      const timeout = await readStream(tg.url('/v1/chat/completions', 'on'), asking({ head: 'hang', pieces: [] }));
      assert.equal(timeout.status, 200);
      assert.equal(timeout.ending, 'clean');
      assert.equal(errorEvent(timeout.text)!.error.code, 'upstream_timeout');
      // Not stretched by the comments (which come more often than the deadline): it ended, and no
      // sooner than responseHeadersMs. How much later is the machine's business, not asserted.
      const done = timeout.chunks.at(-1)!.at;
      assert.ok(done >= 650, `cut off at responseHeadersMs as without comments: ${done} ms`);
      assert.ok(waitingComments(timeout).length >= 1);
      const timeoutLine = await accessLine(tg, timeout.id);
      assert.equal(timeoutLine.status, 504);
      assert.equal(timeoutLine.outcome, 'upstream_timeout');
      assert.equal(timeoutLine.keptAlive, true);
      assert.equal(timeoutLine.bytesOut, Buffer.byteLength(timeout.text), 'the comments and Sluice\'s error event');

      const reset = await readStream(tg.url('/v1/chat/completions', 'on'), asking({ headDelayMs: 500, head: 'reset', pieces: [] }));
      assert.equal(reset.ending, 'clean');
      const event = errorEvent(reset.text)!;
      assert.equal(event.error.code, 'upstream_unavailable');
      assert.equal(typeof event.error.message, 'string');
      const resetLine = await accessLine(tg, reset.id);
      assert.equal(resetLine.status, 502);
      assert.equal(resetLine.outcome, 'upstream_unavailable');
      assert.equal(await metric(tg, 'sluice_requests_total{service="on",status="504",outcome="upstream_timeout"}'), 1);
      assert.equal(await metric(tg, 'sluice_requests_total{service="on",status="502",outcome="upstream_unavailable"}'), 1);
    });

    test('the body idle deadline runs as without the comments: a stream that stalls after the comments is cut (upstream_idle)', async () => {
      const { tg } = await setup(workers, { timeouts: { bodyIdleMs: 500 } });
      const read = await readStream(tg.url('/v1/chat/completions', 'on'), asking({ headDelayMs: 450, pieces: [[0, 'data: a\n\n']], end: 'hang' }));
      assert.equal(read.status, 200);
      assert.equal(read.ending, 'cut', 'the caller can tell the stream is incomplete');
      assert.equal(read.text, WAITING.repeat(waitingComments(read).length) + 'data: a\n\n', 'no comment inside the replica\'s stream');
      const cutAt = read.chunks.at(-1)!.at;
      const line = await accessLine(tg, read.id);
      assert.equal(line.outcome, 'upstream_error');
      assert.equal(line.status, 200);
      assert.equal(line.events, 1);
      assert.ok(Number(line.ms) - Number(line.firstEventMs) >= 495, `cut bodyIdleMs after the event: ${String(line.ms)} ms, the event at ${String(line.firstEventMs)} (last bytes at ${cutAt})`);
      assert.equal(await metric(tg, 'sluice_stream_interruptions_total{service="on",reason="upstream_idle"}'), 1);
    });

    test('a caller that leaves while kept alive is a 499, and the replica\'s exchange is closed', async () => {
      const { tg, replica } = await setup(workers);
      const read = await readStream(tg.url('/v1/chat/completions', 'on'), asking({ head: 'hang', pieces: [] }), {}, (_, soFar) => soFar.split(WAITING).length > 2);
      assert.equal(read.status, 200);
      const line = await accessLine(tg, read.id);
      assert.equal(line.status, 499);
      assert.equal(line.outcome, 'client_closed');
      assert.equal(line.keptAlive, true);
      await eventually(() => replica.abandoned === 1, 5_000, 'the replica\'s request closed');
      assert.equal(await metric(tg, 'sluice_requests_total{service="on",status="499",outcome="client_closed"}'), 1);
    });

    test('a kept-alive request still waiting for its replica when the drain runs out is cut, and logged as 503 draining', async () => {
      const { tg } = await setup(workers, {}, { drainTimeoutMs: 300 });
      let commented = false;
      const reading = readStream(tg.url('/v1/chat/completions', 'on'), asking({ head: 'hang', pieces: [] }), {}, (_, soFar) => ((commented = soFar.includes(WAITING)), false));
      await eventually(() => commented, 10_000, 'a comment read');
      await tg.gateway.drain();
      const read = await reading;
      assert.equal(read.status, 200);
      assert.equal(read.ending, 'cut');
      assert.ok(waitingComments(read).length >= 1);
      const line = await accessLine(tg, read.id);
      assert.equal(line.status, 503, 'not the 200 of the comments: the answer never came');
      assert.equal(line.outcome, 'draining');
      assert.equal(line.keptAlive, true);
    });
  });
}
