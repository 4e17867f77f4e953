// A request refused while its caller is still sending the body (413 past maxRequestBytes, or an
// upstream error mid-upload) gets its whole error before the connection closes: the rest of the
// body is read and dropped, within LINGER_BYTES and LINGER_MS (src/relay/linger.ts). Closing at
// once reset the connection with the caller's bytes unread, and a caller still writing saw EPIPE
// or a reset instead of its 413. Raw sockets, so every byte and every close is seen as sent.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { LINGER_BYTES, LINGER_MS } from '../src/relay/linger.js';
import { closedPort, readBody, startReplica, type TestReplica } from './helpers/replica.js';
import { TEST_TOKEN, rawService, startTestGateway, type TestGateway } from './helpers/gateway.js';

let replica: TestReplica;
let tg: TestGateway;

before(async () => {
  replica = await startReplica(async (req, res) => {
    const body = await readBody(req);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`got ${body.length}`);
  });
  const down = await closedPort();
  tg = await startTestGateway([
    rawService({ urls: [replica.url] }, { slug: 'small', maxRequestBytes: 1000 }),
    rawService({ urls: [`http://127.0.0.1:${down}`] }, { slug: 'down' }),
  ]);
});

after(async () => {
  await tg.close();
  await replica.close();
});

interface Exchange {
  /** Everything the gateway sent, as latin1. */
  answer: string;
  /** A socket error the caller saw (EPIPE, ECONNRESET), if any. */
  error: string | undefined;
  /** Body bytes the caller managed to write. */
  written: number;
}

/**
 * Sends `head`, then body pieces from `next` as fast as the socket takes them, and collects the
 * answer until the connection closes. `next` returning `undefined` sends nothing for now: it is
 * asked again when more of the answer arrives.
 */
function exchange(head: string, next: (written: number, answer: string) => Buffer | undefined): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = net.connect(tg.port, '127.0.0.1');
    let answer = '';
    let error: string | undefined;
    let written = 0;
    let sending = true;
    socket.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      pump();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      sending = false;
      error ??= err.code ?? String(err);
    });
    socket.on('close', () => resolve({ answer, error, written }));
    const pump = (): void => {
      while (sending && !socket.destroyed) {
        const piece = next(written, answer);
        if (piece === undefined) return;
        written += piece.length;
        if (!socket.write(piece)) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    socket.on('connect', () => {
      socket.write(head);
      pump();
    });
  });
}

const CHUNK = Buffer.alloc(4096, 0x61);
const chunkPiece = Buffer.concat([Buffer.from(`${CHUNK.length.toString(16)}\r\n`), CHUNK, Buffer.from('\r\n')]);
const LAST_CHUNK = Buffer.from('0\r\n\r\n');

function post(slug: string, framing: string): string {
  return `POST /api/v1/services/${slug}/request/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n${framing}\r\n`;
}

/** A chunked body of `total` bytes, then its last chunk. */
function chunkedBody(total: number): (written: number) => Buffer | undefined {
  let sent = 0;
  let ended = false;
  return () => {
    if (sent < total) {
      sent += CHUNK.length;
      return chunkPiece;
    }
    if (ended) return undefined;
    ended = true;
    return LAST_CHUNK;
  };
}

/** Splits an answer into its head and its (chunked) body, decoded; asserts the body is complete. */
function decode(answer: string): { head: string; body: string } {
  const split = answer.indexOf('\r\n\r\n');
  assert.ok(split > 0, `an answer head (got ${JSON.stringify(answer.slice(0, 200))})`);
  const head = answer.slice(0, split);
  assert.match(head, /\r\ntransfer-encoding: chunked/i);
  let rest = answer.slice(split + 4);
  let body = '';
  for (;;) {
    const line = rest.indexOf('\r\n');
    assert.ok(line > 0, `a chunk size line (got ${JSON.stringify(rest)})`);
    const size = Number.parseInt(rest.slice(0, line), 16);
    if (size === 0) {
      assert.equal(rest.slice(line), '\r\n\r\n', 'the last chunk ends the answer');
      return { head, body };
    }
    body += rest.slice(line + 2, line + 2 + size);
    assert.equal(rest.slice(line + 2 + size, line + 4 + size), '\r\n');
    rest = rest.slice(line + 4 + size);
  }
}

function assertError(answer: string, status: number, code: string): void {
  const { head, body } = decode(answer);
  assert.match(head, new RegExp(`^HTTP/1\\.1 ${status} `));
  assert.match(head, new RegExp(`\\r\\nx-sluice-error: ${code}(\\r\\n|$)`, 'i'));
  assert.match(head, /\r\nconnection: close(\r\n|$)/i, 'the caller is told the connection ends');
  assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, code);
}

test('a chunked upload far past maxRequestBytes gets its whole 413, every time, and no reset', async () => {
  for (let round = 0; round < 10; round++) {
    const result = await exchange(post('small', 'Transfer-Encoding: chunked\r\n'), chunkedBody(512 * 1024));
    assert.equal(result.error, undefined, `round ${round}: the caller saw ${result.error}`);
    assertError(result.answer, 413, 'payload_too_large');
    assert.ok(result.written > 512 * 1024, 'the whole body was sent');
  }
  const res = await fetch(tg.url('/ok', 'small'), { method: 'POST', headers: { authorization: `Bearer ${TEST_TOKEN}` }, body: 'hello' });
  assert.equal(await res.text(), 'got 5', 'the gateway goes on serving');
});

test('a declared Content-Length over the limit: the 413 comes before the body is sent, and the body is read', async () => {
  const total = 512 * 1024;
  for (let round = 0; round < 5; round++) {
    let sent = 0;
    const result = await exchange(post('small', `Content-Length: ${total}\r\n`), (_written, answer) => {
      // The body only starts once the 413's head is in: the refusal does not wait for it.
      if (!answer.includes('\r\n\r\n') || sent >= total) return undefined;
      const piece = CHUNK.subarray(0, Math.min(CHUNK.length, total - sent));
      sent += piece.length;
      return piece;
    });
    assert.equal(result.error, undefined, `round ${round}: the caller saw ${result.error}`);
    assertError(result.answer, 413, 'payload_too_large');
    assert.equal(result.written, total);
  }
});

test('an upstream error while the caller is still uploading reaches it whole', async () => {
  const result = await exchange(post('down', 'Transfer-Encoding: chunked\r\n'), chunkedBody(256 * 1024));
  assert.equal(result.error, undefined, `the caller saw ${result.error}`);
  assertError(result.answer, 502, 'upstream_unavailable');
});

test('a caller that keeps sending past LINGER_BYTES is no longer read, and is let go after LINGER_MS with its 413', async () => {
  const started = performance.now();
  const result = await exchange(post('small', 'Transfer-Encoding: chunked\r\n'), () => chunkPiece);
  const elapsed = performance.now() - started;
  assert.ok(result.written > LINGER_BYTES, `${result.written} bytes sent, more than ${LINGER_BYTES}`);
  // Not read past LINGER_BYTES: what was sent beyond it fits in the two sockets' buffers.
  assert.ok(result.written < LINGER_BYTES + 64 * 1024 * 1024, `${result.written} bytes sent before the cut`);
  assert.ok(elapsed >= LINGER_MS - 50, `let go after ${elapsed.toFixed(0)} ms, no earlier than ${LINGER_MS} ms`);
  assert.match(result.answer, /^HTTP\/1\.1 413 /);
  assert.match(result.answer, /"payload_too_large"/, 'the error body came before the cut');
  assert.ok(!result.answer.endsWith('0\r\n\r\n'), 'a cut answer has no last chunk');
});

test('a caller that stops sending its declared body is let go after LINGER_MS, with its 413', async () => {
  const started = performance.now();
  let sent = false;
  const result = await exchange(post('small', 'Content-Length: 1000000\r\n'), () => {
    if (sent) return undefined;
    sent = true;
    return CHUNK;
  });
  const elapsed = performance.now() - started;
  assert.ok(elapsed >= LINGER_MS - 50, `let go after ${elapsed.toFixed(0)} ms, no earlier than ${LINGER_MS} ms`);
  assert.match(result.answer, /^HTTP\/1\.1 413 /);
  assert.match(result.answer, /"payload_too_large"/);
});
