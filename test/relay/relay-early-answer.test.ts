// A replica that answers before it has read the caller's upload and closes its connection
// (docs/api.md#an-answer-while-the-caller-is-still-uploading): the caller gets the replica's answer,
// as it would sent straight to the replica, never `502 upstream_unavailable`. The replicas are what
// such servers are: Python's own wsgiref (test/fixtures/wsgi-echo.py reads CONTENT_LENGTH bytes,
// so none of a chunked body, answers and closes), and raw Node sockets that read the head only,
// answer and close with the body unread (the kernel then resets the connection, and the gateway's
// next write of the body fails). The client is curl, which sends its head and body in separate
// writes. A replica that resets without answering is still a 502, and its access line names the
// socket's error as an error (not `"type":"Object","stack":""`).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CURL_SKIP, type CurlResult, runCurl } from '../helpers/curl.js';
import { rawService, startTestGateway, TEST_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';
import { startWsgiReplica, type WsgiEcho, type WsgiReplica } from '../helpers/wsgi-replica.js';

const IN_CI = process.env['CI'] === 'true' || process.env['CI'] === '1';
const HAVE_PYTHON = spawnSync('python3', ['--version']).status === 0;
const SKIP_PYTHON = !HAVE_PYTHON && !IN_CI ? 'no python3 on this machine' : CURL_SKIP;

/** Larger than the default `uploads.bufferBytes` (1 MiB): a chunked body streams on past it. */
const BODY_BYTES = 2 * 1024 * 1024;

/** How a raw replica answers once it has the request's head, leaving the body unread. */
const ANSWERS: Record<string, { bytes: string; fin: boolean }> = {
  // The answer, then a close with the body unread: the kernel sends a reset, no FIN.
  '/length-reset': { bytes: 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nearly answer', fin: false },
  // The answer and a FIN, then the close (as wsgiref does: shutdown, then close).
  '/length-fin': { bytes: 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nearly answer', fin: true },
  // An HTTP/1.0 answer whose body ends with the connection.
  '/until-close': { bytes: 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nearly answer, ended by the close', fin: true },
  // No answer at all: the close resets the connection.
  '/reset': { bytes: '', fin: false },
};

interface RawReplica {
  url: string;
  /** The path of every request whose head it read. */
  heads: string[];
  close(): Promise<void>;
}

/** A replica on raw sockets that reads a request's head, answers as ANSWERS says, and closes without reading the body. */
async function startRawReplica(): Promise<RawReplica> {
  const heads: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let head = '';
    const onData = (data: Buffer): void => {
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      // Reads nothing more: what the gateway sends from now on stays unread in the kernel.
      socket.off('data', onData);
      socket.pause();
      const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' ', head.indexOf(' ') + 1));
      heads.push(path);
      const answer = ANSWERS[`/${path.split('/')[1]}`] ?? ANSWERS['/reset']!;
      if (answer.fin) socket.end(answer.bytes, 'latin1', () => socket.destroy());
      else if (answer.bytes === '') socket.destroy();
      else socket.write(answer.bytes, 'latin1', () => socket.destroy());
    };
    socket.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    heads,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

let wsgi: WsgiReplica;
let raw: RawReplica;
let tg: TestGateway;
let dir: string;
let bodyFile: string;

before(async () => {
  if (HAVE_PYTHON) wsgi = await startWsgiReplica();
  raw = await startRawReplica();
  tg = await startTestGateway([
    ...(HAVE_PYTHON ? [rawService({ urls: [wsgi.url] }, { slug: 'wsgi' })] : []),
    rawService({ urls: [raw.url] }, { slug: 'raw' }),
  ]);
  dir = mkdtempSync(join(tmpdir(), 'sluice-early-answer-'));
  bodyFile = join(dir, 'body');
  writeFileSync(bodyFile, Buffer.alloc(BODY_BYTES, 0x61));
});

after(async () => {
  await tg?.close();
  await raw?.close();
  await wsgi?.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * curl POSTing the 2 MiB file to `url`: chunked (`-X POST -T -`, fed on its standard input, as
 * an unknown length) or with Content-Length (`--data-binary @file`).
 */
function curlUpload(url: string, chunked: boolean, name: string): Promise<CurlResult> {
  const upload = chunked ? ['-X', 'POST', '-T', '-'] : ['--data-binary', `@${bodyFile}`];
  return runCurl(['--max-time', '60', '-H', `Authorization: Bearer ${TEST_TOKEN}`, ...upload, url], join(dir, `out-${name}`), chunked ? readFileSync(bodyFile) : undefined);
}

async function accessLineOf(path: string): Promise<Record<string, unknown>> {
  const find = (): Record<string, unknown> | undefined => tg.logs.find((l) => l['msg'] === 'request' && l['path'] === path);
  await eventually(() => find() !== undefined, 10_000, `the access line of ${path}`);
  return find()!;
}

test('a wsgiref replica answers a 2 MiB chunked upload before reading it: curl gets its 200, every time', { skip: SKIP_PYTHON }, async () => {
  for (let i = 0; i < 3; i++) {
    const path = `/wsgi-chunked-${i}`;
    const result = await curlUpload(tg.url(path, 'wsgi'), true, `wsgi-${i}`);
    assert.equal(result.code, 0, `curl exited ${result.code} (${result.status}: ${result.body})`);
    assert.equal(result.status, '200', result.body);
    const echo = JSON.parse(result.body) as WsgiEcho;
    assert.equal(echo.transferEncoding, 'chunked', 'the body went on chunked, past uploads.bufferBytes');
    assert.equal(echo.read, 0, 'the replica read none of it');
    const line = await accessLineOf(path);
    assert.equal(line['status'], 200);
    assert.equal(line['outcome'], 'ok');
    assert.equal(line['err'], undefined);
  }
});

for (const answer of ['/length-reset', '/length-fin', '/until-close']) {
  test(`a raw replica answers (${answer.slice(1)}) and closes before reading a 2 MiB upload, chunked or with Content-Length: the caller gets the answer`, { skip: CURL_SKIP }, async () => {
    for (const chunked of [true, false]) {
      const path = `${answer}/${chunked ? 'chunked' : 'length'}`;
      const result = await curlUpload(tg.url(path, 'raw'), chunked, path.replaceAll('/', '-'));
      assert.equal(result.code, 0, `${path}: curl exited ${result.code} (${result.status}: ${result.body})`);
      assert.equal(result.status, '200', path);
      const bytes = ANSWERS[answer]!.bytes;
      assert.equal(result.body, bytes.slice(bytes.indexOf('\r\n\r\n') + 4), path);
      assert.ok(raw.heads.includes(path), `${path} reached the replica`);
      const line = await accessLineOf(path);
      assert.equal(line['outcome'], 'ok', path);
      assert.equal(line['err'], undefined, path);
    }
  });
}

test('a replica that resets a 2 MiB upload without answering: 502, and the access line names the socket error as an error', { skip: CURL_SKIP }, async () => {
  const result = await curlUpload(tg.url('/reset', 'raw'), true, 'reset');
  assert.equal(result.status, '502');
  assert.equal((JSON.parse(result.body) as { error: { code: string } }).error.code, 'upstream_unavailable');
  const line = await accessLineOf('/reset');
  assert.equal(line['outcome'], 'upstream_unavailable');
  const err = line['err'] as Record<string, unknown>;
  assert.match(String(err['code']), /^(ECONNRESET|EPIPE|UPSTREAM_CLOSED)$/);
  assert.equal(typeof err['message'], 'string');
  assert.notEqual(err['type'], 'Object', 'the error is logged as what it is');
  assert.ok(err['stack'] === undefined || (typeof err['stack'] === 'string' && err['stack'] !== ''), 'no empty stack');
  assert.deepEqual(Object.keys(err).sort(), ['code', 'message', 'type']);
});
