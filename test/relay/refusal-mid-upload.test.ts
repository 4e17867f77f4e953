// An answer that comes while the caller is still sending its body: a 413 past maxRequestBytes,
// an error from upstream or the queue mid-upload, or a replica that answers before reading the
// whole upload. The caller gets the whole answer at once, and then:
// - when the caller declared its length and at most 128 KiB of the body remain, the rest is read
//   and dropped and the connection serves the caller's next request;
// - otherwise (a chunked body, or more left) nothing more is read: the answer says
//   `Connection: close` and the gateway closes the connection about 10 s later (uWS's idle timer),
//   however much the caller still sends. Reading on had no end: a caller streamed 256 MiB into a
//   service whose limit is 1 MiB. Closing at once instead resets the connection with the caller's
//   bytes unread, and a caller still writing saw EPIPE or a reset instead of its 413; an error
//   that ended only with the body's last byte reached clients that stop sending (curl) or upload
//   slowly (fetch, undici) cut off.
// Raw sockets, so every byte and every close is seen as sent, and real clients: curl, fetch and
// undici with streamed bodies. (Head-only refusals, 401 and the like, still close at once:
// test/relay/hostile-auth.test.ts.)
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { Readable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { closedPort, readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { CURL_SKIP, type CurlResult, runCurl } from '../helpers/curl.js';
import { TEST_TOKEN, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { UWS_IDLE_MS } from '../helpers/uws-timing.js';
import { eventually, sleep } from '../helpers/wait.js';

const LIMIT = 1000;
/** The queued service's limit: past HOLD_HIGH_WATER (64 KiB, where a queued caller is paused) and
 *  within the rest of the read uWS still delivers after the pause. */
const QUEUED_LIMIT = 80_000;

/** The early-refusing service's limit, and what its replica answers before reading an upload. */
const EARLY_LIMIT = 1024 * 1024;
const EARLY_ANSWER = '{"error":"the replica refuses this upload"}';

let replica: TestReplica;
let earlyReplica: TestReplica;
let tg: TestGateway;
let releaseHold: () => void = () => {};
const held = new Promise<void>((resolve) => (releaseHold = resolve));
let dir: string;

before(async () => {
  // Refuses every upload before reading any of it (Node reads and drops the rest itself).
  earlyReplica = await startReplica((_req, res) => {
    res.writeHead(500, { 'content-type': 'application/json', 'content-length': String(EARLY_ANSWER.length) });
    res.end(EARLY_ANSWER);
  });
  replica = await startReplica(async (req, res) => {
    if (req.url?.startsWith('/hold')) await held;
    const answer = `got ${(await readBody(req)).length}`;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(answer.length) });
    res.end(answer);
  });
  const down = await closedPort();
  tg = await startTestGateway([
    rawService({ urls: [replica.url] }, { slug: 'small', maxRequestBytes: LIMIT, methods: ['POST', 'HEAD'] }),
    // Streamed as they come, not held (docs/configuration.md#chunked-uploads): the answers below come mid-upload.
    rawService({ urls: [`http://127.0.0.1:${down}`] }, { slug: 'down', uploads: { bufferBytes: 0 } }),
    rawService({ urls: [replica.url], concurrency: 1 }, { slug: 'one', maxRequestBytes: QUEUED_LIMIT }),
    rawService({ urls: [earlyReplica.url] }, { slug: 'early', maxRequestBytes: EARLY_LIMIT, uploads: { bufferBytes: 0 } }),
  ]);
  dir = mkdtempSync(join(tmpdir(), 'sluice-mid-upload-'));
});

after(async () => {
  releaseHold();
  await tg.close();
  await replica.close();
  await earlyReplica.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  head: string;
  body: string;
}

/** The complete Content-Length answers at the start of `text` (an incomplete one is left out). */
function parseAnswers(text: string): Answer[] {
  const answers: Answer[] = [];
  let rest = text;
  for (;;) {
    const split = rest.indexOf('\r\n\r\n');
    if (split < 0) return answers;
    const head = rest.slice(0, split);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    assert.ok(length !== null, `every answer here has a Content-Length (got ${JSON.stringify(head)})`);
    const end = split + 4 + Number(length[1]);
    if (rest.length < end) return answers;
    answers.push({ status: Number(head.slice(9, 12)), head, body: rest.slice(split + 4, end) });
    rest = rest.slice(end);
  }
}

/** Waits until this many answers have arrived, before the next piece is written. */
interface WaitFor {
  answers: number;
}

/** Chunked body data, written in 64 KiB chunks for as long as the socket takes them, up to `bytes`. */
interface KeepSending {
  chunkedBytes: number;
}

type Piece = Buffer | string | WaitFor | KeepSending;

interface Conversation {
  answers: Answer[];
  /** A socket error the caller saw (EPIPE, ECONNRESET), if any. */
  error: string | undefined;
  /** Bytes the caller managed to write. */
  written: number;
  /** The gateway closed (or reset) the connection; false when the test ended it. */
  closedByGateway: boolean;
  /** Milliseconds from the first answer to the gateway's close (NaN without either). */
  closeAfterAnswerMs: number;
  /** The answers had arrived whole before the connection closed or failed. */
  answersBeforeClose: number;
}

/**
 * Writes `pieces` in order on one connection (as fast as the socket takes them; a `WaitFor`
 * holds the next piece until that many answers are in) and resolves once `expected` complete
 * answers have arrived (with `untilClose`, once the gateway closed the connection instead), or
 * the connection closed, or after `timeoutMs`.
 */
function converse(pieces: Piece[], expected: number, timeoutMs = 15_000, untilClose = false): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = net.connect(tg.port, '127.0.0.1');
    let text = '';
    let error: string | undefined;
    let written = 0;
    let next = 0;
    let done = false;
    let byGateway = false;
    let firstAnswerAt = NaN;
    let answersBeforeClose = 0;
    let waiting: (() => void) | undefined;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answers: parseAnswers(text), error, written, closedByGateway: byGateway, closeAfterAnswerMs: byGateway ? performance.now() - firstAnswerAt : NaN, answersBeforeClose });
    };
    const closed = (): void => {
      if (done) return;
      byGateway = true;
      finish();
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const got = parseAnswers(text).length;
      answersBeforeClose = got;
      if (got > 0 && Number.isNaN(firstAnswerAt)) firstAnswerAt = performance.now();
      if (got >= expected && !untilClose) finish();
      else waiting?.();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? String(err);
      closed();
    });
    socket.on('end', closed);
    socket.on('close', closed);
    let streamed = 0;
    const pump = (): void => {
      waiting = undefined;
      while (next < pieces.length && !done) {
        const piece = pieces[next]!;
        if (typeof piece === 'object' && !Buffer.isBuffer(piece) && 'answers' in piece) {
          if (parseAnswers(text).length < piece.answers) {
            waiting = pump;
            return;
          }
          next++;
          continue;
        }
        if (typeof piece === 'object' && !Buffer.isBuffer(piece)) {
          if (streamed >= piece.chunkedBytes) {
            next++;
            continue;
          }
          streamed += BIG_CHUNK.length - BIG_CHUNK_FRAMING;
          written += BIG_CHUNK.length;
          if (!socket.write(BIG_CHUNK)) {
            socket.once('drain', pump);
            return;
          }
          continue;
        }
        next++;
        written += Buffer.byteLength(piece);
        if (!socket.write(piece)) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    socket.on('connect', pump);
  });
}

/** One 64 KiB chunk of a chunked body, framed. */
const BIG_CHUNK = Buffer.concat([Buffer.from('10000\r\n'), Buffer.alloc(0x10000, 0x65), Buffer.from('\r\n')]);
const BIG_CHUNK_FRAMING = BIG_CHUNK.length - 0x10000;

const CHUNK = Buffer.alloc(4096, 0x61);

function post(slug: string, framing: string): string {
  return `POST /api/v1/services/${slug}/request/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n${framing}\r\n`;
}

/** `total` bytes of a chunked body in 4 KiB chunks, with its last chunk if `last`. */
function chunkedBody(total: number, last = true): Buffer {
  const piece = Buffer.concat([Buffer.from(`${CHUNK.length.toString(16)}\r\n`), CHUNK, Buffer.from('\r\n')]);
  const pieces = Array.from({ length: Math.ceil(total / CHUNK.length) }, () => piece);
  return Buffer.concat(last ? [...pieces, Buffer.from('0\r\n\r\n')] : pieces);
}

/**
 * A small request behind the refused one, on the same connection: served if the connection is
 * kept. Written once the error is in, as a client that does not pipeline (uWS closes a connection
 * that pipelines a request behind one it has not answered yet).
 */
const FOLLOW_UP = `${post('small', 'Content-Length: 5\r\n')}hello`;

/** Sluice's error `status`/`code`, whole; `kept`: the connection is kept (else `Connection: close`). */
function assertError(answer: Answer | undefined, status: number, code: string, kept: boolean): void {
  assert.ok(answer !== undefined, 'the error arrived whole');
  assert.equal(answer.status, status, answer.head);
  assert.match(answer.head, new RegExp(`\\r\\nx-sluice-error: ${code}(\\r\\n|$)`, 'i'));
  if (kept) assert.doesNotMatch(answer.head, /\r\nconnection: close/i, 'the connection is kept');
  else assert.match(answer.head, /\r\nconnection: close(\r\n|$)/i, 'the answer says the connection closes');
  assert.equal((JSON.parse(answer.body) as { error: { code: string } }).error.code, code);
}

function assertFollowUp(answer: Answer | undefined): void {
  assert.ok(answer !== undefined, 'the request behind the refused body was answered on the same connection');
  assert.equal(answer.status, 200);
  assert.equal(answer.body, 'got 5');
}

/**
 * uWS's idle timer (10 s, checked every 4 s; 30 s with v20.57.0) closes a connection that is no
 * longer read: allow for a busy machine, but far less than a caller could keep a connection read without end.
 */
const CLOSE_WITHIN_MS = UWS_IDLE_MS + 15_000;

/** The answer came whole, then the gateway closed the connection, neither at once nor never. */
function assertClosedLater(result: Conversation): void {
  assert.ok(result.answersBeforeClose >= 1, 'the answer arrived whole before the connection closed');
  assert.ok(result.closedByGateway, `the gateway closed the connection (still open after ${CLOSE_WITHIN_MS} ms)`);
  assert.ok(result.closeAfterAnswerMs >= 1_000, `the connection was not closed right behind the answer (${Math.round(result.closeAfterAnswerMs)} ms)`);
}

// Each case waits for the gateway to close its connection (about 10 s): they run side by side.
describe('answers that come while the caller is still sending', { concurrency: true }, () => {
  test('a chunked upload far past maxRequestBytes: its whole 413 at once, every time; nothing more is read and the gateway closes the connection', async () => {
    const rounds = await Promise.all(
      Array.from({ length: 6 }, () => converse([post('small', 'Transfer-Encoding: chunked\r\n'), chunkedBody(512 * 1024)], 1, CLOSE_WITHIN_MS, true)),
    );
    for (const [round, result] of rounds.entries()) {
      assertError(result.answers[0], 413, 'payload_too_large', false);
      assertClosedLater(result);
      assert.equal(result.answers.length, 1, `round ${round}: one answer`);
    }
  });

  test('a declared Content-Length over the limit: the 413 comes before the body is sent; none of the body is read and the gateway closes the connection', async () => {
    const total = 512 * 1024;
    // The body only starts once the 413 is in: the refusal does not wait for it.
    const result = await converse([post('small', `Content-Length: ${total}\r\n`), { answers: 1 }, Buffer.alloc(total, 0x62), FOLLOW_UP], 1, CLOSE_WITHIN_MS, true);
    assertError(result.answers[0], 413, 'payload_too_large', false);
    assertClosedLater(result);
    assert.equal(result.answers.length, 1, 'the request behind the body was never read');
  });

  test('HEAD with a declared body over the limit: a bodiless 413, none of the body read, the connection closed', async () => {
    const total = 64 * 1024;
    const head = `HEAD /api/v1/services/small/request/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Length: ${total}\r\n\r\n`;
    const result = await converse([head, { answers: 1 }, Buffer.alloc(total, 0x62)], 1, CLOSE_WITHIN_MS, true);
    const answer = result.answers[0];
    assert.ok(answer !== undefined, 'the 413 arrived');
    assert.equal(answer.status, 413, answer.head);
    assert.match(answer.head, /\r\nx-sluice-error: payload_too_large(\r\n|$)/i);
    assert.match(answer.head, /\r\nconnection: close(\r\n|$)/i);
    assert.equal(answer.body, '', 'no body for HEAD');
    assertClosedLater(result);
  });

  test('an upstream error while a chunked upload goes on reaches the caller whole; nothing more is read and the gateway closes the connection', async () => {
    // Half the body, then the 502 (the replica's port refuses), then the rest: the error comes mid-upload.
    const pieces = [post('down', 'Transfer-Encoding: chunked\r\n'), chunkedBody(128 * 1024, false), { answers: 1 }, chunkedBody(128 * 1024), FOLLOW_UP];
    const result = await converse(pieces, 1, CLOSE_WITHIN_MS, true);
    assertError(result.answers[0], 502, 'upstream_unavailable', false);
    assertClosedLater(result);
    assert.equal(result.answers.length, 1, 'the request behind the body was never read');
  });

  test('an upstream error with at most 128 KiB of a declared body left: the error whole, the rest read and dropped, the connection kept', async () => {
    // At most 128 KiB left whenever the error comes (it comes with the body's first bytes).
    const total = 120 * 1024;
    const first = 60 * 1024;
    const pieces = [post('down', `Content-Length: ${total}\r\n`), Buffer.alloc(first, 0x66), { answers: 1 }, Buffer.alloc(total - first, 0x66), FOLLOW_UP];
    const result = await converse(pieces, 2);
    assert.equal(result.error, undefined, `the caller saw ${result.error}`);
    assertError(result.answers[0], 502, 'upstream_unavailable', true);
    assertFollowUp(result.answers[1]);
  });

  test('the limit crossed after a queued request paused its caller: the whole 413, the socket stays paused, the gateway closes the connection', async () => {
    // The only slot of `one` is held, so the next request waits in the queue with its caller paused
    // at 64 KiB; uWS still delivers the rest of that read, which crosses the limit.
    const holder = fetch(tg.url('/hold', 'one'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}` }, body: 'x' });
    await waitForInflight(1);
    try {
      const result = await converse([post('one', 'Transfer-Encoding: chunked\r\n'), chunkedBody(1024 * 1024)], 1, CLOSE_WITHIN_MS, true);
      assertError(result.answers[0], 413, 'payload_too_large', false);
      assertClosedLater(result);
    } finally {
      releaseHold();
      assert.equal(await (await holder).text(), 'got 1');
    }
  });

  // ── a replica that answers before it read the upload ─────────────────────────────────────────

  test('a replica refusing a chunked upload early: its 500 reaches the caller whole and first, and a caller that keeps sending 256 MiB into a 1 MiB service is cut off near the limit', async () => {
    // A first chunk, the replica's answer, then the caller keeps sending regardless.
    const pieces = [post('early', 'Transfer-Encoding: chunked\r\n'), chunkedBody(4096, false), { answers: 1 }, { chunkedBytes: 256 * 1024 * 1024 }];
    const result = await converse(pieces, 1, CLOSE_WITHIN_MS, true);
    const answer = result.answers[0];
    assert.ok(answer !== undefined, 'the replica\'s answer arrived whole');
    assert.equal(answer.status, 500, answer.head);
    assert.equal(answer.body, EARLY_ANSWER, 'the replica\'s own body, untouched');
    assert.doesNotMatch(answer.head, /x-sluice-error/i, 'relayed, not Sluice\'s own error');
    // What the gateway read is at most the limit; the rest of what the caller wrote sat in socket
    // buffers (a few MiB on loopback) when the connection closed.
    assert.ok(result.written < EARLY_LIMIT + 32 * 1024 * 1024, `the caller was cut off near the limit (it wrote ${result.written} bytes)`);
    assertClosedLater(result);
    assert.match(answer.head, /\r\nconnection: close(\r\n|$)/i, 'the answer says the connection closes');
  });

  test('a replica refusing early with at most 128 KiB of a declared body left: its answer whole, the rest read and dropped, the connection kept', async () => {
    const total = 120 * 1024;
    const first = 60 * 1024;
    const pieces = [post('early', `Content-Length: ${total}\r\n`), Buffer.alloc(first, 0x67), { answers: 1 }, Buffer.alloc(total - first, 0x67), FOLLOW_UP];
    const result = await converse(pieces, 2);
    assert.equal(result.error, undefined, `the caller saw ${result.error}`);
    assert.equal(result.answers[0]?.status, 500);
    assert.equal(result.answers[0]?.body, EARLY_ANSWER);
    assert.doesNotMatch(result.answers[0]!.head, /\r\nconnection: close/i);
    assertFollowUp(result.answers[1]);
  });
});

async function waitForInflight(n: number): Promise<void> {
  await eventually(async () => ((await metric(tg, 'sluice_inflight_requests')) ?? 0) >= n, 30_000, `${n} request(s) in flight`);
}

// ── real clients ─────────────────────────────────────────────────────────────────────────────

/** curl's exit code, the HTTP status and body it got, for a slow upload of a 5 MiB file. */
function curlUpload(extra: string[]): Promise<CurlResult> {
  const file = join(dir, 'five-mib');
  writeFileSync(file, Buffer.alloc(5 * 1024 * 1024, 0x63));
  const args = ['--max-time', '20', '--limit-rate', '200K', '-H', `Authorization: Bearer ${TEST_TOKEN}`, ...extra, '--data-binary', `@${file}`, tg.url('/upload', 'small')];
  return runCurl(args, join(dir, `out-${extra.length}`));
}

test('curl uploading 5 MiB at 200 KB/s gets its whole 413 and exits 0 (Content-Length and chunked)', { skip: CURL_SKIP }, async () => {
  for (const extra of [[], ['-H', 'Transfer-Encoding: chunked']]) {
    const result = await curlUpload(extra);
    assert.equal(result.code, 0, `curl ${extra.join(' ')} exited ${result.code}`);
    assert.equal(result.status, '413');
    assert.equal((JSON.parse(result.body) as { error: { code: string } }).error.code, 'payload_too_large');
  }
});

/** 16 KiB every 20 ms, up to SLOW_BODY_BYTES (over a minute): far slower than the answer; `sent` counts the bytes handed over. */
const SLOW_BODY_BYTES = 64 * 1024 * 1024;
function slowBody(): { body: AsyncGenerator<Buffer>; sent: () => number } {
  let sent = 0;
  async function* generate(): AsyncGenerator<Buffer> {
    for (let i = 0; i < SLOW_BODY_BYTES / (16 * 1024); i++) {
      sent += 16 * 1024;
      yield Buffer.alloc(16 * 1024, 0x64);
      await sleep(20);
    }
  }
  return { body: generate(), sent: () => sent };
}

test('fetch with a streamed body gets its whole 413 while it is still uploading', async () => {
  const { body, sent } = slowBody();
  const res = await fetch(tg.url('/upload', 'small'), {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
    body: ReadableStream.from(body),
    duplex: 'half',
  } as RequestInit);
  assert.equal(res.status, 413);
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'payload_too_large');
  assert.ok(sent() < SLOW_BODY_BYTES, `the answer came before the upload ended (${sent()} bytes sent)`);
  await body.return(undefined);
});

test('undici.request with a streamed body gets its whole 413 while it is still uploading', async () => {
  const { body, sent } = slowBody();
  const res = await request(tg.url('/upload', 'small'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}` }, body: Readable.from(body) });
  assert.equal(res.statusCode, 413);
  assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'payload_too_large');
  assert.ok(sent() < SLOW_BODY_BYTES, `the answer came before the upload ended (${sent()} bytes sent)`);
  await body.return(undefined);
});
