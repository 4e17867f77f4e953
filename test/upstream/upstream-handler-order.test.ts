// The upstream pool's handler contract, checked on real sockets: `onUpstreamConnection` once (or
// an error), then each field of the head, `onUpstreamHead` at most once, `onUpstreamData` any number of times, and exactly
// one of `onUpstreamEnd` / `onUpstreamError` — nothing after it, and nothing after `abort()`; what a
// read brings happens inside that read's `onUpstreamRead`.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { RelayError } from '../../src/http/errors.js';
import type { UpstreamConnection } from '../../src/upstream/connection.js';
import type { UpstreamHandler } from '../../src/upstream/handler.js';
import { CONNECTS_PER_TURN } from '../../src/tunables.js';
import { UpstreamPool } from '../../src/upstream/pool.js';
import { answer, type ScriptedReplica, startScriptedReplica } from '../fixtures/scripted-replica.js';
import { closedPort } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

class Recorder implements UpstreamHandler {
  readonly calls: string[] = [];
  /** The head's fields as reported, `name: value`. */
  readonly fields: string[] = [];
  connection: UpstreamConnection | undefined;
  error: RelayError | undefined;
  body = '';
  private readonly settled: Promise<void>;
  private settle!: () => void;

  constructor(
    private readonly path: string,
    private readonly abortAfterHead = false,
  ) {
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  /** Per entry of `calls`, the `onUpstreamRead` it happened in (1, 2, …), or 0 outside any. */
  readonly reads: number[] = [];
  private readsSeen = 0;
  private currentRead = 0;

  onUpstreamRead(parse: () => void): boolean {
    if (this.currentRead !== 0) this.calls.push('read inside a read');
    this.currentRead = ++this.readsSeen;
    parse();
    this.currentRead = 0;
    return true;
  }
  private push(call: string): void {
    this.calls.push(call);
    this.reads.push(this.currentRead);
  }

  onUpstreamConnection(connection: UpstreamConnection): void {
    this.push('connection');
    this.connection = connection;
    connection.send(`GET ${this.path} HTTP/1.1\r\nhost: x\r\n\r\n`, true, false, undefined, true);
  }
  onUpstreamField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void {
    if (this.calls.some((c) => c.startsWith('head'))) this.push('field after the head');
    this.fields.push(`${buf.toString('latin1', nameStart, nameEnd)}: ${buf.toString('latin1', valueStart, valueEnd)}`);
  }
  onUpstreamHead(status: number): void {
    this.push(`head ${status}`);
    if (this.abortAfterHead) {
      this.connection!.abort();
      this.settle();
    }
  }
  onUpstreamHeadRead(): void {
    this.push('head read');
  }
  onUpstreamData(chunk: Buffer): boolean {
    if (this.calls.at(-1) !== 'data') this.push('data');
    this.body += chunk.toString('latin1');
    return true;
  }
  onUpstreamEnd(): void {
    this.push('end');
    this.settle();
  }
  onUpstreamError(error: RelayError): void {
    this.push(`error${error.retryable ? ' (retryable)' : ''}`);
    this.error = error;
    this.settle();
  }
  onUpstreamWritable(): void {}

  /** Settled, then past a witness (a round trip to the replica) to catch anything that comes after the end. */
  async done(): Promise<string[]> {
    await this.settled;
    await roundTrip();
    return this.calls;
  }
}

/**
 * A later event to check an absence against: a request to the replica on a new connection,
 * answered. The socket events already under way when it starts are handled before its answer.
 */
async function roundTrip(): Promise<void> {
  const socket = connect(replica.port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write('GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
  let text = '';
  for await (const chunk of socket) {
    text += (chunk as Buffer).toString('latin1');
    if (text.endsWith('hello')) break;
  }
  socket.destroy();
}

let replica: ScriptedReplica;

before(async () => {
  replica = await startScriptedReplica((socket, req) => {
    switch (req.target) {
      case '/ok':
        socket.write(answer('hello'));
        return;
      case '/echo':
        socket.write(answer(req.body.toString('latin1')));
        return;
      case '/malformed':
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx');
        return;
      case '/truncated':
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello');
        setTimeout(() => socket.destroy(), 20);
        return;
      case '/head-then-body':
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n');
        // The body comes from the test, once the head has been handed on.
        return;
      case '/split-head':
        // The rest of the head, and the body, come from the test.
        socket.write('HTTP/1.1 200 OK\r\nContent-Len');
        return;
      case '/stream':
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
        setTimeout(() => socket.write('5\r\nworld\r\n'), 20);
        return;
      default:
        return; // never answers
    }
  });
});

after(() => replica.close());

function poolFor(port: number): UpstreamPool {
  return new UpstreamPool('127.0.0.1', port, { maxConnections: 2, connectMs: 2_000, headersMs: 5_000, bodyIdleMs: 5_000 });
}

test('a complete answer: connection, head, data, end', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/ok');
  pool.request(r);
  assert.deepEqual(await r.done(), ['connection', 'head 200', 'data', 'end']);
  assert.equal(r.body, 'hello');
  assert.deepEqual(r.fields, ['content-type: text/plain', 'content-length: 5']);
  // The connection is not a read; the answer came in one read, and everything it brought inside it.
  assert.deepEqual(r.reads, [0, 1, 1, 1]);
  await pool.close();
});

test('a head alone in its read: head, head read, then the body in a later read, end', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/head-then-body');
  pool.request(r);
  await eventually(() => r.calls.includes('head read'), 5_000, 'the head read');
  replica.connections.at(-1)!.socket.write('hello');
  assert.deepEqual(await r.done(), ['connection', 'head 200', 'head read', 'data', 'end']);
  // The head read is still inside the read that brought the head; the body's read is another.
  assert.deepEqual(r.reads, [0, 1, 1, 2, 2]);
  await pool.close();
});

test('a head split over two reads: head read after the read that completed it, not the one with its status line', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/split-head');
  pool.request(r);
  // The connection has read the status line and part of a field (white-box: the parser's byte count).
  await eventually(() => (r.connection as unknown as { parser: { bytesSeen: number } } | undefined)?.parser.bytesSeen !== undefined && (r.connection as unknown as { parser: { bytesSeen: number } }).parser.bytesSeen > 0, 5_000, 'the first piece read');
  assert.deepEqual(r.calls, ['connection']);
  replica.connections.at(-1)!.socket.write('gth: 5\r\n\r\n');
  await eventually(() => r.calls.includes('head read'), 5_000, 'the head read');
  replica.connections.at(-1)!.socket.write('hello');
  assert.deepEqual(await r.done(), ['connection', 'head 200', 'head read', 'data', 'end']);
  // The field split over the two reads is reported whole, before the head.
  assert.deepEqual(r.fields, ['Content-Length: 5']);
  await pool.close();
});

test('a refused connection: one retryable error, nothing else', async () => {
  const pool = poolFor(await closedPort());
  const r = new Recorder('/ok');
  pool.request(r);
  assert.deepEqual(await r.done(), ['error (retryable)']);
  assert.equal(r.error!.code, 'upstream_unavailable');
  await pool.close();
});

test('a malformed answer: connection, one error (not retryable), no head', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/malformed');
  pool.request(r);
  assert.deepEqual(await r.done(), ['connection', 'error']);
  assert.deepEqual(r.reads, [0, 1], 'the parse error inside the read that brought it');
  assert.match(String((r.error!.cause as Error).message), /Content-Length/);
  await pool.close();
});

test('an answer cut short: connection, head, data, error', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/truncated');
  pool.request(r);
  assert.deepEqual(await r.done(), ['connection', 'head 200', 'data', 'head read', 'error']);
  // The error comes with the close that no read brings: outside any read.
  assert.deepEqual(r.reads, [0, 1, 1, 1, 0]);
  await pool.close();
});

test('destroying the pool fails the exchange in progress once', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/silent');
  pool.request(r);
  await eventually(() => r.calls.length > 0, 5_000, 'the connection');
  pool.destroy();
  assert.deepEqual(await r.done(), ['connection', 'error']);
  assert.equal(pool.size, 0);
});

test('abort() after the head: nothing more is called, and the connection is closed', async () => {
  const pool = poolFor(replica.port);
  const r = new Recorder('/stream', true);
  pool.request(r);
  assert.deepEqual(await r.done(), ['connection', 'head 200']);
  assert.equal(pool.size, 0);
  await pool.close();
});

test('requests beyond maxConnections wait for a connection and all complete', async () => {
  const pool = poolFor(replica.port);
  const recorders = Array.from({ length: 6 }, () => new Recorder('/ok'));
  for (const r of recorders) pool.request(r);
  assert.ok(pool.size <= 2);
  for (const r of recorders) assert.deepEqual(await r.done(), ['connection', 'head 200', 'data', 'end']);
  assert.ok(pool.size <= 2);
  await pool.close();
});

test('a burst of new connections opens CONNECTS_PER_TURN per turn of the loop; every request completes', async () => {
  const pool = new UpstreamPool('127.0.0.1', replica.port, { maxConnections: 0, connectMs: 5_000, headersMs: 5_000, bodyIdleMs: 5_000 });
  const recorders = Array.from({ length: CONNECTS_PER_TURN * 3 + 5 }, () => new Recorder('/ok'));
  for (const r of recorders) pool.request(r);
  // Synchronously, only the first batch has sockets; the rest are granted and wait for later turns.
  assert.equal(pool.size, CONNECTS_PER_TURN);
  assert.equal(pool.opening, recorders.length - CONNECTS_PER_TURN);
  for (const r of recorders) assert.deepEqual(await r.done(), ['connection', 'head 200', 'data', 'end']);
  assert.equal(pool.opening, 0);
  await pool.close();
});

test('a request cancelled before its connection was opened gets no call and no connection', async () => {
  const pool = new UpstreamPool('127.0.0.1', replica.port, { maxConnections: 0, connectMs: 5_000, headersMs: 5_000, bodyIdleMs: 5_000 });
  const recorders = Array.from({ length: CONNECTS_PER_TURN + 2 }, () => new Recorder('/ok'));
  for (const r of recorders) pool.request(r);
  const cancelled = recorders.at(-1)!;
  pool.cancel(cancelled);
  assert.equal(pool.opening, 1);
  for (const r of recorders.slice(0, -1)) assert.deepEqual(await r.done(), ['connection', 'head 200', 'data', 'end']);
  await roundTrip();
  assert.deepEqual(cancelled.calls, []);
  await pool.close();
});

test('destroying or closing the pool fails requests whose connection was not opened yet, once, retryable', async () => {
  for (const end of ['destroy', 'close'] as const) {
    const pool = new UpstreamPool('127.0.0.1', replica.port, { maxConnections: 0, connectMs: 5_000, headersMs: 5_000, bodyIdleMs: 5_000 });
    const recorders = Array.from({ length: CONNECTS_PER_TURN + 3 }, () => new Recorder('/silent'));
    for (const r of recorders) pool.request(r);
    if (end === 'destroy') pool.destroy();
    else void pool.close();
    for (const r of recorders.slice(CONNECTS_PER_TURN)) assert.deepEqual(await r.done(), ['error (retryable)'], end);
    if (end === 'close') pool.destroy();
    for (const r of recorders.slice(0, CONNECTS_PER_TURN)) assert.equal((await r.done()).filter((c) => c.startsWith('error')).length, 1, end);
    assert.equal(pool.size, 0);
  }
});

test('sendWhole writes a body valid only during the call (head and body in one buffer) and keeps a copy of it', async () => {
  const pool = poolFor(replica.port);
  for (const [size, chunked] of [[5, false], [5, true], [20_000, false], [20_000, true]] as const) {
    const bytes = new Uint8Array(size).fill(0x61);
    bytes[size - 1] = 0x7a;
    let kept: Buffer | undefined;
    const r = new (class extends Recorder {
      override onUpstreamConnection(connection: UpstreamConnection): void {
        this.calls.push('connection');
        this.connection = connection;
        const framing = chunked ? 'transfer-encoding: chunked' : `content-length: ${size}`;
        kept = connection.sendWhole(`POST /echo HTTP/1.1\r\nhost: x\r\n${framing}\r\n\r\n`, true, chunked, bytes);
        bytes.fill(0x21); // uWS reuses its buffer after the call
      }
    })('/echo');
    pool.request(r);
    assert.deepEqual(await r.done(), ['connection', 'head 200', 'data', 'end']);
    const expected = 'a'.repeat(size - 1) + 'z';
    assert.equal(r.body, expected, `${size} ${chunked}`);
    assert.equal(kept!.toString('latin1'), expected, `${size} ${chunked}`);
  }
  await pool.close();
});

test('regression: destroying the pool also fails the requests waiting for a connection (retryable), once each', { timeout: 10_000 }, async () => {
  const pool = new UpstreamPool('127.0.0.1', replica.port, { maxConnections: 1, connectMs: 2_000, headersMs: 5_000, bodyIdleMs: 5_000 });
  const busy = new Recorder('/silent');
  const waiting = new Recorder('/ok');
  pool.request(busy);
  pool.request(waiting);
  await eventually(() => busy.calls.length > 0, 5_000, 'the connection');
  pool.destroy();
  // Before the fix the waiter was never called: its request hung until its caller left.
  assert.deepEqual(await waiting.done(), ['error (retryable)']);
  assert.deepEqual(await busy.done(), ['connection', 'error']);
  assert.equal(pool.size, 0);
});
