// A request refused while its caller is still sending the body (413 past maxRequestBytes, or an
// error from upstream mid-upload) gets its whole error at once, and the connection is kept: the
// rest of the body is read and dropped, and the next request on the connection is served.
// Closing with the caller's bytes unread would reset the connection, and a caller still writing
// saw EPIPE or a reset instead of its 413; an error that ended only with the body's last byte
// reached clients that stop sending (curl) or upload slowly (fetch, undici) cut off.
// Raw sockets, so every byte and every close is seen as sent, and real clients: curl, fetch and
// undici with streamed bodies. (Head-only refusals, 401 and the like, still close at once:
// contract section 2; test/hostile-auth.test.ts.)
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { Readable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { closedPort, readBody, startReplica, type TestReplica } from './helpers/replica.js';
import { TEST_TOKEN, metric, rawService, startTestGateway, type TestGateway } from './helpers/gateway.js';

const LIMIT = 1000;
/** The queued service's limit: past HOLD_HIGH_WATER (64 KiB, where a queued caller is paused) and
 *  within the rest of the read uWS still delivers after the pause. */
const QUEUED_LIMIT = 80_000;

let replica: TestReplica;
let tg: TestGateway;
let releaseHold: () => void = () => {};
const held = new Promise<void>((resolve) => (releaseHold = resolve));
let dir: string;

before(async () => {
  replica = await startReplica(async (req, res) => {
    if (req.url?.startsWith('/hold')) await held;
    const answer = `got ${(await readBody(req)).length}`;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(answer.length) });
    res.end(answer);
  });
  const down = await closedPort();
  tg = await startTestGateway([
    rawService({ urls: [replica.url] }, { slug: 'small', maxRequestBytes: LIMIT, methods: ['POST', 'HEAD'] }),
    rawService({ urls: [`http://127.0.0.1:${down}`] }, { slug: 'down' }),
    rawService({ urls: [replica.url], concurrency: 1 }, { slug: 'one', maxRequestBytes: QUEUED_LIMIT }),
  ]);
  dir = mkdtempSync(join(tmpdir(), 'sluice-mid-upload-'));
});

after(async () => {
  releaseHold();
  await tg.close();
  await replica.close();
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

interface Conversation {
  answers: Answer[];
  /** A socket error the caller saw (EPIPE, ECONNRESET), if any. */
  error: string | undefined;
  /** Bytes the caller managed to write. */
  written: number;
}

/**
 * Writes `pieces` in order on one connection (as fast as the socket takes them; a `WaitFor`
 * holds the next piece until that many answers are in) and resolves once `expected` complete
 * answers have arrived, or the connection closed, or after `timeoutMs`.
 */
function converse(pieces: (Buffer | string | WaitFor)[], expected: number, timeoutMs = 15_000): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = net.connect(tg.port, '127.0.0.1');
    let text = '';
    let error: string | undefined;
    let written = 0;
    let next = 0;
    let done = false;
    let waiting: (() => void) | undefined;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ answers: parseAnswers(text), error, written });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const got = parseAnswers(text).length;
      if (got >= expected) finish();
      else waiting?.();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? String(err);
    });
    socket.on('close', finish);
    const pump = (): void => {
      waiting = undefined;
      while (next < pieces.length && !done) {
        const piece = pieces[next]!;
        if (typeof piece === 'object' && !Buffer.isBuffer(piece)) {
          if (parseAnswers(text).length < piece.answers) {
            waiting = pump;
            return;
          }
          next++;
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

function assertError(answer: Answer | undefined, status: number, code: string): void {
  assert.ok(answer !== undefined, 'the error arrived whole');
  assert.equal(answer.status, status, answer.head);
  assert.match(answer.head, new RegExp(`\\r\\nx-sluice-error: ${code}(\\r\\n|$)`, 'i'));
  assert.doesNotMatch(answer.head, /\r\nconnection: close/i, 'the connection is kept');
  assert.equal((JSON.parse(answer.body) as { error: { code: string } }).error.code, code);
}

function assertFollowUp(answer: Answer | undefined): void {
  assert.ok(answer !== undefined, 'the request behind the refused body was answered on the same connection');
  assert.equal(answer.status, 200);
  assert.equal(answer.body, 'got 5');
}

test('a chunked upload far past maxRequestBytes: its whole 413 at once, every time; the rest is dropped and the connection serves the next request', async () => {
  for (let round = 0; round < 10; round++) {
    const result = await converse([post('small', 'Transfer-Encoding: chunked\r\n'), chunkedBody(512 * 1024), { answers: 1 }, FOLLOW_UP], 2);
    assert.equal(result.error, undefined, `round ${round}: the caller saw ${result.error}`);
    assertError(result.answers[0], 413, 'payload_too_large');
    assertFollowUp(result.answers[1]);
  }
});

test('a declared Content-Length over the limit: the 413 comes before the body is sent; the body is dropped and the connection serves the next request', async () => {
  const total = 512 * 1024;
  for (let round = 0; round < 5; round++) {
    // The body only starts once the 413 is in: the refusal does not wait for it.
    const result = await converse([post('small', `Content-Length: ${total}\r\n`), { answers: 1 }, Buffer.alloc(total, 0x62), { answers: 1 }, FOLLOW_UP], 2);
    assert.equal(result.error, undefined, `round ${round}: the caller saw ${result.error}`);
    assertError(result.answers[0], 413, 'payload_too_large');
    assertFollowUp(result.answers[1]);
  }
});

test('HEAD with a declared body over the limit: a bodiless 413, the body dropped, the connection kept', async () => {
  const total = 64 * 1024;
  const head = `HEAD /api/v1/services/small/request/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Length: ${total}\r\n\r\n`;
  const result = await converse([head, { answers: 1 }, Buffer.alloc(total, 0x62), { answers: 1 }, FOLLOW_UP], 2);
  assert.equal(result.error, undefined, `the caller saw ${result.error}`);
  const answer = result.answers[0];
  assert.ok(answer !== undefined, 'the 413 arrived');
  assert.equal(answer.status, 413, answer.head);
  assert.match(answer.head, /\r\nx-sluice-error: payload_too_large(\r\n|$)/i);
  assert.equal(answer.body, '', 'no body for HEAD');
  assertFollowUp(result.answers[1]);
});

test('an upstream error while the caller is still uploading reaches it whole, and the connection is kept', async () => {
  // Half the body, then the 502 (the replica's port refuses), then the rest: the error comes mid-upload.
  const pieces = [post('down', 'Transfer-Encoding: chunked\r\n'), chunkedBody(128 * 1024, false), { answers: 1 }, chunkedBody(128 * 1024), FOLLOW_UP];
  const result = await converse(pieces, 2);
  assert.equal(result.error, undefined, `the caller saw ${result.error}`);
  assertError(result.answers[0], 502, 'upstream_unavailable');
  assertFollowUp(result.answers[1]);
});

test('the limit crossed after a queued request paused its caller: the socket is resumed and the rest is read', async () => {
  // The only slot of `one` is held, so the next request waits in the queue with its caller paused
  // at 64 KiB; uWS still delivers the rest of that read, which crosses the limit.
  const holder = fetch(tg.url('/hold', 'one'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}` }, body: 'x' });
  await waitForInflight(1);
  try {
    const result = await converse([post('one', 'Transfer-Encoding: chunked\r\n'), chunkedBody(1024 * 1024), { answers: 1 }, FOLLOW_UP], 2, 10_000);
    assert.equal(result.error, undefined, `the caller saw ${result.error}`);
    assertError(result.answers[0], 413, 'payload_too_large');
    assertFollowUp(result.answers[1]);
  } finally {
    releaseHold();
    assert.equal(await (await holder).text(), 'got 1');
  }
});

async function waitForInflight(n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (((await metric(tg, 'sluice_inflight_requests')) ?? 0) >= n) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never ${n} request(s) in flight`);
}

// ── real clients ─────────────────────────────────────────────────────────────────────────────

const IN_CI = process.env['CI'] === 'true' || process.env['CI'] === '1';
const HAVE_CURL = spawnSync('curl', ['--version']).status === 0;
const SKIP_CURL = !HAVE_CURL && !IN_CI ? 'no curl on this machine (CI installs it: .ci/install-curl)' : false;

/** curl's exit code, the HTTP status and body it got, for a slow upload of a 5 MiB file. */
function curlUpload(extra: string[]): Promise<{ code: number | null; status: string; body: string }> {
  const file = join(dir, 'five-mib');
  writeFileSync(file, Buffer.alloc(5 * 1024 * 1024, 0x63));
  const out = join(dir, `out-${extra.length}`);
  const args = ['-sS', '-o', out, '-w', '%{http_code}', '--max-time', '20', '--limit-rate', '200K', '-H', `Authorization: Bearer ${TEST_TOKEN}`, ...extra, '--data-binary', `@${file}`, tg.url('/upload', 'small')];
  return new Promise((resolve, reject) => {
    const child = spawn('curl', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let status = '';
    child.stdout.on('data', (d: Buffer) => (status += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      let body = '';
      try {
        body = readFileSync(out, 'utf8');
      } catch {
        // no body file: curl failed before writing one
      }
      resolve({ code, status, body });
    });
  });
}

test('curl uploading 5 MiB at 200 KB/s gets its whole 413 and exits 0 (Content-Length and chunked)', { skip: SKIP_CURL }, async () => {
  assert.ok(HAVE_CURL, 'CI=true and no curl: .ci/install-curl should have installed it');
  for (const extra of [[], ['-H', 'Transfer-Encoding: chunked']]) {
    const result = await curlUpload(extra);
    assert.equal(result.code, 0, `curl ${extra.join(' ')} exited ${result.code}`);
    assert.equal(result.status, '413');
    assert.equal((JSON.parse(result.body) as { error: { code: string } }).error.code, 'payload_too_large');
  }
});

/** 16 KiB every 20 ms, up to 4 MiB: far slower than the answer; `sent` counts the bytes handed over. */
function slowBody(): { body: AsyncGenerator<Buffer>; sent: () => number } {
  let sent = 0;
  async function* generate(): AsyncGenerator<Buffer> {
    for (let i = 0; i < 256; i++) {
      sent += 16 * 1024;
      yield Buffer.alloc(16 * 1024, 0x64);
      await new Promise((resolve) => setTimeout(resolve, 20));
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
  assert.ok(sent() < 4 * 1024 * 1024, `the answer came before the upload ended (${sent()} bytes sent)`);
  await body.return(undefined);
});

test('undici.request with a streamed body gets its whole 413 while it is still uploading', async () => {
  const { body, sent } = slowBody();
  const res = await request(tg.url('/upload', 'small'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}` }, body: Readable.from(body) });
  assert.equal(res.statusCode, 413);
  assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'payload_too_large');
  assert.ok(sent() < 4 * 1024 * 1024, `the answer came before the upload ended (${sent()} bytes sent)`);
  await body.return(undefined);
});
