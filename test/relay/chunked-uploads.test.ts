// Chunked uploads reach every replica (docs/configuration.md#chunked-uploads): a chunked body is
// held until it ends or passes the service's `uploads.bufferBytes`, and one that ends within the
// bound goes to the replica whole, with Content-Length. The replica here is what many model
// servers are: a WSGI app on Python's own wsgiref, which reads its body by CONTENT_LENGTH and sees
// a chunked one as empty (test/fixtures/wsgi-echo.py). The cases that stream chunked use a Node
// replica, which reads either framing and records when each byte came.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { AUTH, TEST_TOKEN, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type CountingReplica, startCountingReplica } from '../helpers/counting-replica.js';
import { rawExchange } from '../helpers/raw-http.js';
import { eventually } from '../helpers/wait.js';
import { startWsgiReplica, type WsgiEcho, type WsgiReplica } from '../helpers/wsgi-replica.js';

const BOUND = 64 * 1024;

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function accessLine(tg: TestGateway, path: string): Record<string, unknown> | undefined {
  return tg.logs.find((l) => l['msg'] === 'request' && l['path'] === path);
}

async function accessLineOf(tg: TestGateway, path: string): Promise<Record<string, unknown>> {
  await eventually(() => accessLine(tg, path) !== undefined, 10_000, `the access line of ${path}`);
  return accessLine(tg, path)!;
}

/** The JSON of a `200` answer that ends its connection (its framing aside). */
function echoOf(answer: string): WsgiEcho {
  assert.match(answer, /^HTTP\/1\.1 200 /);
  return JSON.parse(answer.slice(answer.indexOf('{'), answer.lastIndexOf('}') + 1)) as WsgiEcho;
}

/** A raw-socket request with a chunked body whose pieces the test writes one by one. */
function openUpload(port: number, path: string, close = false): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => {
      const connection = close ? 'Connection: close\r\n' : '';
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Type: application/json\r\n${connection}Transfer-Encoding: chunked\r\n\r\n`);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

function chunk(piece: Buffer | string): Buffer {
  const bytes = typeof piece === 'string' ? Buffer.from(piece) : piece;
  return Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);
}

function header(rawHeaders: string[], name: string): string | undefined {
  const i = rawHeaders.findIndex((h, j) => j % 2 === 0 && h.toLowerCase() === name);
  return i < 0 ? undefined : rawHeaders[i + 1];
}

describe('chunked uploads', () => {
  let wsgi: WsgiReplica;
  let node: CountingReplica;
  let tg: TestGateway;

  before(async () => {
    wsgi = await startWsgiReplica();
    node = await startCountingReplica();
    tg = await startTestGateway([
      rawService({ urls: [wsgi.url] }, { slug: 'wsgi' }),
      rawService({ urls: [node.url] }, { slug: 'bounded', uploads: { bufferBytes: BOUND } }),
      rawService({ urls: [node.url] }, { slug: 'small-bound', uploads: { bufferBytes: 1000 } }),
      rawService({ urls: [node.url] }, { slug: 'streamed', uploads: { bufferBytes: 0 } }),
      // One hold of 192 KiB and the queue's 64 KiB at most: two holds of 160 KiB do not fit.
      rawService({ urls: [node.url] }, { slug: 'tight', uploads: { bufferBytes: 192 * 1024 }, queue: { maxRequests: 1 } }),
      // One front-end thread: the account is per service and thread.
    ], { workers: 1 });
  });

  after(async () => {
    await tg.close();
    await node.close();
    await wsgi.close();
  });

  /** `{}` to the WSGI service with Content-Length. */
  async function post(path: string): Promise<WsgiEcho> {
    const res = await request(tg.url(path, 'wsgi'), { method: 'POST', headers: AUTH, body: '{}' });
    assert.equal(res.statusCode, 200);
    return (await res.body.json()) as WsgiEcho;
  }

  /** Uploads `pieces` to the WSGI service, chunked, one write each; the answer's JSON. */
  async function upload(path: string, pieces: Buffer[]): Promise<WsgiEcho> {
    const socket = await openUpload(tg.port, new URL(tg.url(path, 'wsgi')).pathname, true);
    const answer = new Promise<string>((resolve) => {
      const got: Buffer[] = [];
      socket.on('data', (b: Buffer) => got.push(b));
      socket.on('close', () => resolve(Buffer.concat(got).toString('latin1')));
    });
    for (const piece of pieces) socket.write(chunk(piece));
    socket.write('0\r\n\r\n');
    return echoOf(await answer);
  }

  test('a small chunked JSON body reaches a WSGI replica whole, with Content-Length', async () => {
    const json = '{"prompt":"hello","max_tokens":16}\n  \n';
    const pieces = [json.slice(0, 10), json.slice(10, 25), json.slice(25)].map((p) => Buffer.from(p));
    const echo = await upload('/small', pieces);
    assert.deepEqual(echo, { contentLength: String(json.length), transferEncoding: null, read: json.length, sha256: sha256(Buffer.from(json)) });
    assert.equal((await accessLineOf(tg, '/small'))['heldBytes'], json.length, 'the access line says the body was held');
  });

  test('a chunked body that arrives in one packet with its head goes with Content-Length too', async () => {
    const json = '{"prompt":"one packet"}';
    const head = `POST ${new URL(tg.url('/one-packet', 'wsgi')).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`;
    const exchange = await rawExchange(tg.port, `${head}${chunk(json).toString('latin1')}0\r\n\r\n`);
    const echo = echoOf(exchange.bytes.toString('latin1'));
    assert.equal(echo.contentLength, String(json.length));
    assert.equal(echo.read, json.length);
  });

  test('Expect: 100-continue is answered at once, and the body is then held and sent with Content-Length', async () => {
    const path = new URL(tg.url('/expect', 'wsgi')).pathname;
    const socket = connect({ port: tg.port, host: '127.0.0.1' });
    let text = '';
    const got = (what: RegExp): Promise<void> =>
      new Promise((resolve) => {
        const check = (): void => {
          if (what.test(text)) resolve();
          else socket.once('data', check);
        };
        check();
      });
    socket.on('data', (b: Buffer) => {
      text += b.toString('latin1');
    });
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
    await got(/^HTTP\/1\.1 100 Continue\r\n\r\n/);
    socket.write(chunk('{"a":'));
    socket.write(chunk('1}'));
    socket.write('0\r\n\r\n');
    await new Promise((resolve) => socket.once('close', resolve));
    const echo = echoOf(text.slice(text.indexOf('\r\n\r\n') + 4));
    assert.equal(echo.contentLength, '7');
    assert.equal(echo.read, 7);
  });

  test('a 512 KiB chunked upload reaches a WSGI replica whole, with Content-Length', async () => {
    const pieces = Array.from({ length: 64 }, (_, i) => Buffer.alloc(8 * 1024, 97 + (i % 26)));
    const all = Buffer.concat(pieces);
    const echo = await upload('/large', pieces);
    assert.deepEqual(echo, { contentLength: String(all.length), transferEncoding: null, read: all.length, sha256: sha256(all) });
    assert.equal((await accessLineOf(tg, '/large'))['heldBytes'], all.length);
  });

  test('a chunked body broken off while held never reaches the replica: no connection, no request', async () => {
    const path = new URL(tg.url('/broken', 'wsgi')).pathname;
    const before = wsgi.lines.length;
    const socket = await openUpload(tg.port, path);
    socket.write(chunk('{"prompt":"never fin'));
    // A request with Content-Length behind it on another connection: by its answer the gateway has long read
    // the first piece (and, with the old code, opened the broken request at the replica).
    assert.equal((await post('/between')).read, 2);
    socket.destroy();
    assert.equal((await accessLineOf(tg, '/broken'))['outcome'], 'client_closed');
    // The WSGI server takes its connections in turn: one more request after the broken one.
    assert.equal((await post('/after')).read, 2);
    await eventually(() => wsgi.lines.includes('request /after'), 10_000, 'the replica logged /after');
    // (Connections alone are not counted: the control plane's readiness probes connect too.)
    const seen = wsgi.lines.slice(before).filter((l) => l.startsWith('request '));
    assert.deepEqual(seen, ['request /between', 'request /after'], 'only the two whole requests reached the replica');
    assert.equal(accessLine(tg, '/broken')!['heldBytes'], undefined, 'a body broken off while held was never sent');
  });

  test('a body past uploads.bufferBytes streams chunked from the moment it passes the bound', async () => {
    const path = new URL(tg.url('/past-bound', 'bounded')).pathname;
    const socket = await openUpload(tg.port, path);
    const piece = Buffer.alloc(48 * 1024, 0x61);
    socket.write(chunk(piece));
    socket.write(chunk(piece));
    // Past the bound (96 KiB of 64): the replica's request starts before the caller's last chunk.
    await eventually(() => node.requests.some((r) => r.url === '/past-bound' && r.body.length >= 2 * piece.length), 10_000, 'the held prefix at the replica');
    const record = node.requests.find((r) => r.url === '/past-bound')!;
    assert.equal(record.complete, false, 'the body is not complete at the replica yet');
    const answered = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (b: Buffer) => {
        text += b.toString('latin1');
        if (text.includes('{"ok":true}')) resolve(text);
      });
    });
    socket.write(chunk('tail'));
    socket.write('0\r\n\r\n');
    assert.match(await answered, /^HTTP\/1\.1 200 /);
    socket.destroy();
    assert.equal(record.complete, true);
    assert.equal(record.body.length, 2 * piece.length + 4);
    assert.equal(header(record.rawHeaders, 'transfer-encoding'), 'chunked');
    assert.equal(header(record.rawHeaders, 'content-length'), undefined);
    const held = (await accessLineOf(tg, '/past-bound'))['heldBytes'] as number;
    assert.ok(held <= BOUND, `held ${held} bytes: what came before the piece that passed the bound, within it`);
  });

  test('heldBytes of a body that went chunked is what was held within uploads.bufferBytes, never its whole length', async () => {
    const body = Buffer.alloc(5000, 0x63);
    const head = (path: string): string =>
      `POST ${new URL(tg.url(path, 'small-bound')).pathname} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`;
    /** The body as chunks of these sizes, each its own write. */
    const pieces = (sizes: number[]): string[] => {
      let at = 0;
      return sizes.map((n) => chunk(body.subarray(at, (at += n))).toString('latin1'));
    };
    const cases: [string, string | string[], number[]][] = [
      // Head, body and end in one write: the body arrives whole, past the bound, and is held not at all.
      ['/one-write', `${head('/one-write')}${chunk(body).toString('latin1')}0\r\n\r\n`, [0]],
      // The head first, then the body as one chunk, then the end.
      ['/one-chunk', [head('/one-chunk'), chunk(body).toString('latin1'), '0\r\n\r\n'], [0]],
      // 600 bytes held; the next 600 would pass the bound of 1000 (0 if a busy gateway reads the two together).
      ['/pieces', [head('/pieces'), ...pieces([600, 600, 3800]), '0\r\n\r\n'], [600, 0]],
    ];
    for (const [path, writes, held] of cases) {
      const exchange = await rawExchange(tg.port, writes, 10_000);
      assert.match(exchange.bytes.toString('latin1'), /^HTTP\/1\.1 200 /, path);
      const record = node.requests.find((r) => r.url === path)!;
      assert.equal(record.body.length, body.length, path);
      assert.equal(header(record.rawHeaders, 'transfer-encoding'), 'chunked', `${path} went chunked`);
      const line = await accessLineOf(tg, path);
      assert.equal(line['bytesIn'], body.length, path);
      assert.ok(held.includes(line['heldBytes'] as number), `${path}: held ${String(line['heldBytes'])} of ${body.length}, not one of ${held.join(', ')}`);
    }
  });

  test('uploads.bufferBytes 0: every chunk is at the replica before the caller sends the next', async () => {
    const path = new URL(tg.url('/at-once', 'streamed')).pathname;
    const socket = await openUpload(tg.port, path);
    const seen = (): Buffer | undefined => node.requests.find((r) => r.url === '/at-once')?.body;
    socket.write(chunk('first,'));
    await eventually(() => seen()?.toString() === 'first,', 10_000, 'the first chunk at the replica');
    socket.write(chunk('second'));
    await eventually(() => seen()?.toString() === 'first,second', 10_000, 'the second chunk at the replica');
    socket.write('0\r\n\r\n');
    await eventually(() => node.requests.find((r) => r.url === '/at-once')?.complete === true, 10_000, 'the end at the replica');
    socket.destroy();
    const record = node.requests.find((r) => r.url === '/at-once')!;
    assert.equal(header(record.rawHeaders, 'transfer-encoding'), 'chunked');
    assert.equal((await accessLineOf(tg, '/at-once'))['heldBytes'], undefined, 'nothing was held');
  });

  test("held bodies share the service's memory bound: a hold that would pass it streams on", async () => {
    const piece = Buffer.alloc(160 * 1024, 0x62);
    const sockets = await Promise.all(['/tight-a', '/tight-b'].map((p) => openUpload(tg.port, new URL(tg.url(p, 'tight')).pathname)));
    for (const socket of sockets) socket.write(chunk(piece));
    // 320 KiB held would pass the bound (max(1 × 64 KiB, 192 KiB)): the later one streams on.
    await eventually(() => node.requests.some((r) => r.url.startsWith('/tight-')), 10_000, 'one of the two at the replica');
    for (const socket of sockets) socket.write('0\r\n\r\n');
    await eventually(() => node.requests.filter((r) => r.url.startsWith('/tight-') && r.complete).length === 2, 10_000, 'both at the replica');
    // Which one passes the bound depends on how the two uploads interleave (both may): at least
    // one streams chunked although its own hold (192 KiB) had room for all of its 160 KiB.
    const streamed = node.requests.filter((r) => r.url.startsWith('/tight-') && header(r.rawHeaders, 'transfer-encoding') === 'chunked');
    assert.ok(streamed.length >= 1, 'a hold that would pass the bound streamed on');
    for (const r of node.requests.filter((x) => x.url.startsWith('/tight-'))) assert.equal(r.body.length, piece.length);
    for (const r of streamed) {
      const held = (await accessLineOf(tg, r.url))['heldBytes'] as number;
      assert.ok(held <= piece.length, `${r.url} streamed on after ${held} bytes, before its own bound`);
    }
    for (const socket of sockets) socket.destroy();
  });
});
