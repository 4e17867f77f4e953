// Kept alive through a cold start: requests for a streamed answer wait in the queue of a launched
// service whose replica (the demo model server) starts when the test opens its gate. Real clients
// read the streams to their end: the OpenAI SDK and curl. The queue's own answers after the
// comments (a failed start, the wait running out, a full queue, a drain) are one error event; a
// caller leaving takes its request out of the queue; a request that did not ask for a stream (also
// one whose `"stream": false` overrules its Accept) waits as before. With one data plane thread and two.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import { AUTH, metric, rawService, startTestGateway, TEST_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { RECORDING_REPLICA, recordFile, recorded } from '../helpers/launched.js';
import { GATED_MODEL_SERVER } from '../helpers/overview.js';
import { errorEvent, readStream, WAITING, waitingComments } from '../helpers/sse-client.js';
import { eventually } from '../helpers/wait.js';

const KEEP_ALIVE_MS = 200;

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

interface Cold {
  tg: TestGateway;
  /** Lets the replica start (it is not even listening before). */
  open(): void;
}

/** A gateway with service `llm`: launched, cold, kept alive every KEEP_ALIVE_MS. */
async function cold(workers: number, options: { command?: string[]; queue?: Record<string, unknown>; extra?: Record<string, unknown>; env?: Record<string, string> } = {}): Promise<Cold> {
  const gate = join(mkdtempSync(join(tmpdir(), 'sluice-gate-')), 'open');
  const tg = await startTestGateway(
    rawService(
      { command: options.command ?? [process.execPath, GATED_MODEL_SERVER], env: { GATE_FILE: gate, TOKEN_DELAY_MS: '5', ...options.env }, readyPath: '/health', max: 1 },
      { slug: 'llm', queue: { keepAliveMs: KEEP_ALIVE_MS, ...options.queue } },
    ),
    { workers, ...options.extra },
  );
  cleanups.push(() => tg.close());
  return { tg, open: () => writeFileSync(gate, '') };
}

const CHAT = (stream: boolean, content = 'hello cold start'): string => JSON.stringify({ model: 'demo', messages: [{ role: 'user', content }], ...(stream ? { stream: true } : {}) });

/** curl reading the answer to its end: its exit code, and what it printed (with -i, the head too; `progress.out` so far). */
function curl(url: string, body: string, headers: string[] = [], progress: { out: string } = { out: '' }): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '-N', '-i', '--max-time', '30', url, '-H', `Authorization: ${AUTH.authorization}`, '-H', 'Content-Type: application/json', ...headers.flatMap((h) => ['-H', h]), '-d', body]);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (progress.out = out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
  });
}

/** The head and body of curl -i output. */
function split(out: string): { head: string; body: string } {
  const at = out.indexOf('\r\n\r\n');
  return { head: out.slice(0, at), body: out.slice(at + 4) };
}

async function accessLine(tg: TestGateway, id: string): Promise<Record<string, unknown>> {
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
  return tg.logs.find((l) => l.msg === 'request' && l.reqId === id)!;
}

function requestLines(tg: TestGateway): Record<string, unknown>[] {
  return tg.logs.filter((l) => l.msg === 'request');
}

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 60_000 }, () => {
    test('through a cold start: the OpenAI SDK and curl read comments and then every event to the end; a request without "stream", and one with "stream": false and an Accept naming both types (MCP), wait as before', async () => {
      const { tg, open } = await cold(workers);
      const client = new OpenAI({ baseURL: tg.url('/v1', 'llm'), apiKey: TEST_TOKEN, maxRetries: 0, timeout: 30_000 });
      const sdk = (async () => {
        const stream = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hello cold start' }], stream: true });
        const deltas: string[] = [];
        let finish: string | null = null;
        for await (const chunk of stream) {
          const choice = chunk.choices[0];
          if (choice?.delta.content) deltas.push(choice.delta.content);
          if (choice?.finish_reason) finish = choice.finish_reason;
        }
        return { deltas, finish };
      })();
      const progress = { out: '' };
      const streamed = curl(tg.url('/v1/chat/completions', 'llm'), CHAT(true), [], progress);
      const plain = curl(tg.url('/v1/chat/completions', 'llm'), CHAT(false));
      // As an MCP client asks for a plain answer: both media types in Accept, `"stream": false` in the body.
      const mcp = curl(tg.url('/v1/chat/completions', 'llm'), JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'hello cold start' }], stream: false }), ['Accept: application/json, text/event-stream']);
      await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="llm",priority="0"}')) === 4, 10_000, 'four queued requests');
      // Three comments reach curl, then the model is "loaded".
      await eventually(() => progress.out.split(WAITING).length - 1 >= 3, 10_000, 'three comments through curl');
      open();

      const { deltas, finish } = await sdk;
      assert.deepEqual(deltas, ['You', ' said:', ' hello', ' cold', ' start'], 'every delta, in order');
      assert.equal(finish, 'stop');

      const s = await streamed;
      assert.equal(s.code, 0, s.out);
      const { head, body } = split(s.out);
      assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(head, /\r\ncontent-type: text\/event-stream\r\n/i);
      const comments = body.split(WAITING).length - 1;
      assert.ok(comments >= 2, `comments while the model loaded: ${comments}`);
      assert.ok(body.startsWith(WAITING.repeat(comments)), 'the comments come first');
      assert.ok(body.indexOf('data: ') > body.lastIndexOf(WAITING), 'then only events');
      assert.ok(body.endsWith('data: [DONE]\n\n'), 'read to its end');

      for (const p of [await plain, await mcp]) {
        assert.equal(p.code, 0, p.out);
        const plainParts = split(p.out);
        assert.match(plainParts.head, /^HTTP\/1\.1 200 OK\r\n/);
        assert.match(plainParts.head, /\r\ncontent-type: application\/json\r\n/i);
        assert.ok(!plainParts.body.includes(WAITING), 'no comment');
        assert.equal((JSON.parse(plainParts.body) as { choices: { message: { content: string } }[] }).choices[0]!.message.content, 'You said: hello cold start');
      }

      await eventually(() => requestLines(tg).length === 4, 10_000, 'four access lines');
      const lines = requestLines(tg);
      const kept = lines.filter((l) => l.keptAlive === true);
      assert.equal(kept.length, 2, 'the two streamed requests were kept alive');
      for (const line of kept) {
        assert.equal(line.status, 200);
        assert.equal(line.outcome, 'ok');
        // Queued, and answered only after the wait. (Not "at least three keepAliveMs": the three
        // comments counted were curl's, and the SDK's request may have arrived later.)
        assert.ok(Number(line.queuedMs) > 0, `queued through the cold start: ${String(line.queuedMs)}`);
        assert.ok(Number(line.events) >= 6, 'its events were counted');
        assert.ok(Number(line.firstEventMs) >= Number(line.queuedMs), 'the first event came after the wait');
      }
      assert.equal(lines.filter((l) => l.keptAlive === undefined && l.events === undefined && l.status === 200).length, 2, 'the two plain requests');
    });

    test('a failed start after the comments: one error event no_replica, for curl and for the OpenAI SDK (an APIError with the code)', async () => {
      const { tg } = await cold(workers, { command: [process.execPath, '-e', 'setTimeout(() => process.exit(3), 900)'] });
      const client = new OpenAI({ baseURL: tg.url('/v1', 'llm'), apiKey: TEST_TOKEN, maxRetries: 0, timeout: 30_000 });
      const sdk = (async () => {
        const stream = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hi' }], stream: true });
        for await (const chunk of stream) void chunk;
      })().then(
        () => undefined,
        (err: unknown) => err,
      );
      const c = await curl(tg.url('/v1/chat/completions', 'llm'), CHAT(true));
      assert.equal(c.code, 0, c.out);
      const { head, body } = split(c.out);
      assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
      assert.ok(body.startsWith(WAITING), 'kept alive first');
      assert.equal(errorEvent(body)!.error.code, 'no_replica');
      assert.equal(body.replaceAll(WAITING, '').split('\n\n').length, 2, 'nothing else');
      const err = await sdk;
      assert.ok(err instanceof OpenAI.APIError, `the stream threw an APIError: ${String(err)}`);
      assert.equal((err.error as { code?: string }).code, 'no_replica');
      await eventually(() => requestLines(tg).length === 2, 10_000, 'two access lines');
      for (const line of requestLines(tg)) {
        assert.equal(line.status, 503);
        assert.equal(line.outcome, 'no_replica');
        assert.equal(line.keptAlive, true);
      }
      assert.equal(await metric(tg, 'sluice_requests_total{service="llm",status="503",outcome="no_replica"}'), 2);
    });

    test('the wait running out (queue.maxWaitMs) and a drain after the comments: one error event each', async () => {
      const expiring = await cold(workers, { queue: { maxWaitMs: 700 } });
      const expired = await readStream(expiring.tg.url('/v1/chat/completions', 'llm'), CHAT(true));
      assert.equal(expired.ending, 'clean');
      assert.ok(waitingComments(expired).length >= 2);
      assert.equal(errorEvent(expired.text)!.error.code, 'no_replica');
      assert.equal((await accessLine(expiring.tg, expired.id)).status, 503);

      const draining = await cold(workers);
      let commented = false;
      const reading = readStream(draining.tg.url('/v1/chat/completions', 'llm'), CHAT(true), {}, (_, soFar) => ((commented = soFar.includes(WAITING)), false));
      await eventually(() => commented, 10_000, 'a comment read');
      const drained = draining.tg.gateway.drain();
      const read = await reading;
      assert.equal(read.status, 200);
      assert.equal(read.ending, 'clean');
      assert.ok(waitingComments(read).length >= 1);
      assert.equal(errorEvent(read.text)!.error.code, 'draining');
      await drained;
      const line = await accessLine(draining.tg, read.id);
      assert.equal(line.status, 503);
      assert.equal(line.outcome, 'draining');
    });

    test('queue_full at once is the plain 503 it always was (answered within keepAliveMs)', async () => {
      const { tg, open } = await cold(workers, { queue: { maxRequests: 1 } });
      const first = readStream(tg.url('/v1/chat/completions', 'llm'), CHAT(true));
      await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="llm",priority="0"}')) === 1, 10_000, 'the first request queued');
      const full = await readStream(tg.url('/v1/chat/completions', 'llm'), CHAT(true));
      assert.equal(full.status, 503);
      assert.equal(full.headers['content-type'], 'application/json');
      assert.equal(full.headers['x-sluice-error'], 'queue_full');
      assert.ok(Number(full.headers['retry-after']) >= 1);
      assert.equal((JSON.parse(full.text) as { error: { code: string } }).error.code, 'queue_full');
      assert.equal((await accessLine(tg, full.id)).keptAlive, undefined);
      open();
      const served = await first;
      assert.ok(served.text.endsWith('data: [DONE]\n\n'));
    });

    if (workers === 2) {
      test('queue_full that reaches a kept-alive request (the control plane answered late) is one error event', async () => {
        const { tg } = await cold(workers, { queue: { maxRequests: 1 } });
        const first = readStream(tg.url('/v1/chat/completions', 'llm'), CHAT(true));
        await eventually(async () => (await metric(tg, 'sluice_queue_depth{service="llm",priority="0"}')) === 1, 10_000, 'the first request queued');
        // The control plane is this thread: keep it busy so the queue's answer to the next request
        // comes after keepAliveMs. The worker that holds the request keeps it alive meanwhile.
        const late = new Promise<{ code: number | null; out: string }>((resolve) => {
          execFile('curl', ['-sS', '-N', '-i', tg.url('/v1/chat/completions', 'llm'), '-H', `Authorization: ${AUTH.authorization}`, '-d', CHAT(true)], (err, stdout) => resolve({ code: err === null ? 0 : 1, out: stdout }));
        });
        const busyUntil = performance.now() + 4 * KEEP_ALIVE_MS + 400;
        while (performance.now() < busyUntil) {
          // busy
        }
        const c = await late;
        assert.equal(c.code, 0, c.out);
        const { head, body } = split(c.out);
        assert.match(head, /^HTTP\/1\.1 200 OK\r\n/);
        assert.ok(body.startsWith(WAITING), `kept alive first: ${JSON.stringify(body)}`);
        assert.equal(errorEvent(body)!.error.code, 'queue_full');
        await eventually(() => requestLines(tg).length === 1, 10_000, 'the access line');
        const line = requestLines(tg)[0]!;
        assert.equal(line.status, 503);
        assert.equal(line.outcome, 'queue_full');
        assert.equal(line.keptAlive, true);
        void first.catch(() => undefined);
      });
    }

    test('a caller that leaves while kept alive in the queue: 499, its queue entry goes, and the replica never sees it', async () => {
      const file = recordFile();
      const { tg } = await cold(workers, { command: [process.execPath, RECORDING_REPLICA], env: { START_DELAY_MS: '1500', RECORD_FILE: file } });
      const read = await readStream(tg.url('/v1/chat/completions', 'llm'), CHAT(true), {}, (_, soFar) => soFar.split(WAITING).length > 2);
      assert.equal(read.status, 200);
      assert.equal(waitingComments(read).length, 2, `${read.ending}: ${JSON.stringify(read.text)}`);
      const line = await accessLine(tg, read.id);
      assert.equal(line.status, 499);
      assert.equal(line.outcome, 'client_closed');
      assert.equal(line.keptAlive, true);
      assert.equal(await metric(tg, 'sluice_queue_depth{service="llm",priority="0"}'), 0, 'out of the queue');
      // The replica started anyway (the cold start was under way); it never gets the request.
      await eventually(() => recorded(file).some((l) => l.includes(' HEALTH ')), 10_000, 'the replica ready');
      // A witness sent after: the queued request, were it still there, would have reached the replica first.
      assert.equal((await fetch(tg.url('/echo', 'llm'), { method: 'POST', headers: AUTH, body: 'witness' })).status, 200);
      assert.deepEqual(recorded(file).filter((l) => !l.includes(' HEALTH ')).map((l) => l.split(' ').slice(1, 3).join(' ')), ['POST /echo']);
    });
  });
}
