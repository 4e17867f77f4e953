// The control plane's GET with a deadline (src/http/probe-client.ts) and the one rule that names a failure
// (src/http/error-code.ts). No sockets: the Agent hands node:http an in-memory connection that the
// test plays the replica on.
import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { once } from 'node:events';
import { Duplex } from 'node:stream';
import { test } from 'node:test';
import { errorCode } from '../../src/http/error-code.js';
import { RelayError } from '../../src/http/errors.js';
import { type GetFailure, getWithDeadline } from '../../src/http/probe-client.js';
import { describeUpstreamError } from '../../src/upstream/errors.js';

/** One in-memory connection: what the client wrote, and `answer` to play the replica. */
class FakeConnection extends Duplex {
  written = '';
  override _read(): void {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.written += chunk.toString('latin1');
    this.emit('wrote');
    callback();
  }
  answer(text: string): void {
    this.push(Buffer.from(text, 'latin1'));
  }
}

/** An Agent whose every connection is a FakeConnection (or fails with `error`). */
class FakeAgent extends Agent {
  readonly connections: FakeConnection[] = [];
  constructor(private readonly error?: Error) {
    super({ keepAlive: false });
  }
  override createConnection(): Duplex {
    const c = new FakeConnection();
    this.connections.push(c);
    if (this.error !== undefined) process.nextTick(() => c.destroy(this.error));
    return c;
  }
}

/** The GET's deadline timer is unref'd (as in the gateway): hold the loop open while a test waits. */
function holdingLoop<T>(p: Promise<T>): Promise<T> {
  const hold = setInterval(() => undefined, 60_000);
  return p.finally(() => clearInterval(hold));
}

/** Waits for `c` to be destroyed, holding the loop open. */
async function destroyed(c: FakeConnection): Promise<void> {
  if (!c.destroyed) await holdingLoop(once(c, 'close'));
}

type Result = { ok: true; status: number; body: string } | { ok: false; failure: GetFailure };
const failed = (failure: GetFailure): Result => ({ ok: false, failure });

/** A GET that reads the whole body. */
function getBody(agent: Agent, timeoutMs: number, url = 'http://replica.test/metrics'): Promise<Result> {
  return holdingLoop(getWithDeadline<Result>(
    agent,
    url,
    { 'user-agent': 'test' },
    timeoutMs,
    (res, answer) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => answer.settle({ ok: true, status: res.statusCode ?? 0, body }));
    },
    failed,
  ));
}

/** The agent's first connection, once the request's head is on it. */
async function requested(agent: FakeAgent): Promise<FakeConnection> {
  while (agent.connections.length === 0) await new Promise<void>((resolve) => setImmediate(resolve));
  const c = agent.connections[0]!;
  while (!c.written.includes('\r\n\r\n')) await once(c, 'wrote');
  return c;
}

test('GET: the head and body within the deadline settle with what the reader made of them', async () => {
  const agent = new FakeAgent();
  const result = getBody(agent, 60_000);
  const c = await requested(agent);
  assert.match(c.written, /^GET \/metrics HTTP\/1\.1\r\n/);
  assert.match(c.written, /\r\nuser-agent: test\r\n/i);
  c.answer('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello');
  assert.deepEqual(await result, { ok: true, status: 200, body: 'hello' });
});

test('GET: no answer by the deadline is a timeout, and the request is destroyed', async () => {
  const agent = new FakeAgent();
  const result = getBody(agent, 5);
  const c = await requested(agent);
  assert.deepEqual(await result, { ok: false, failure: { why: 'timeout' } });
  await destroyed(c);
  assert.equal(c.destroyed, true);
});

test('GET: a reader settled on the head alone still has its body cut at the deadline', async () => {
  const agent = new FakeAgent();
  let resEnded = false;
  const result = getWithDeadline<string>(
    agent,
    'http://replica.test/ready',
    {},
    20,
    (res, answer) => {
      res.on('close', () => (resEnded = true));
      res.resume();
      answer.settle(String(res.statusCode));
    },
    (f) => f.why,
  );
  const c = await requested(agent);
  c.answer('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst bytes of a body that never ends');
  assert.equal(await holdingLoop(result), '200');
  await destroyed(c);
  assert.equal(c.destroyed, true);
  assert.equal(resEnded, true);
});

test('GET: stop() settles and reads nothing more', async () => {
  const agent = new FakeAgent();
  const result = getWithDeadline<string>(agent, 'http://replica.test/metrics', {}, 60_000, (_res, answer) => answer.stop('too large'), (f) => f.why);
  const c = await requested(agent);
  c.answer('HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n');
  assert.equal(await holdingLoop(result), 'too large');
  await destroyed(c);
  assert.equal(c.destroyed, true);
});

test('GET: a connection error is failed with its code; a connection closed before the head is closed', async () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
  assert.deepEqual(await getBody(new FakeAgent(refused), 60_000), { ok: false, failure: { why: 'failed', code: 'ECONNREFUSED' } });

  const agent = new FakeAgent();
  const result = getBody(agent, 60_000);
  const c = await requested(agent);
  c.answer('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
  c.destroy();
  const r = await result;
  assert.equal(r.ok, false);
  // The body cut short: node:http reports it as the answer's error (or its abort) or the request's close.
  assert.ok(['failed', 'closed'].includes((r as { failure: GetFailure }).failure.why), JSON.stringify(r));
});

test('GET: a URL node:http refuses settles as failed, never throws', async () => {
  assert.deepEqual(await getBody(new FakeAgent(), 60_000, 'not a url'), { ok: false, failure: { why: 'failed', code: 'ERR_INVALID_URL' } });
});

test('errorCode: the code, else the first code along the causes, else the name, else "error"', () => {
  const code = (c: unknown): Error => Object.assign(new Error('m'), { code: c });
  assert.equal(errorCode(code('ECONNRESET')), 'ECONNRESET');
  assert.equal(errorCode(new Error('wrapped', { cause: new Error('inner', { cause: code('EPIPE') }) })), 'EPIPE');
  assert.equal(errorCode(new TypeError('no code anywhere')), 'TypeError');
  assert.equal(errorCode(code(503)), 'Error', 'a numeric code (an HTTP status) is not a failure name');
  assert.equal(errorCode({ code: 'ENOTFOUND' }), 'ENOTFOUND');
  assert.equal(errorCode('a string'), 'error');
  assert.equal(errorCode(undefined), 'error');
  const loop = new Error('loop') as Error & { cause?: unknown };
  loop.cause = new Error('back', { cause: loop });
  assert.equal(errorCode(loop), 'Error');
  let deep: Error = code('EDEEP');
  for (let i = 0; i < 20; i++) deep = new Error('level', { cause: deep });
  assert.equal(errorCode(deep), 'Error', 'a chain past 8 causes is not followed');
});

test('errorCode: the access line names a wrapped socket error by its code, and a codeless failure by its name', () => {
  const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  const wrapped = new RelayError('upstream_unavailable', { cause: new Error('exchange failed', { cause: reset }) });
  assert.deepEqual(describeUpstreamError(wrapped), { type: 'Error', code: 'ECONNRESET', message: 'exchange failed' });
  assert.deepEqual(describeUpstreamError(new RelayError('internal_error', { cause: new TypeError('x is undefined') })), { type: 'TypeError', code: 'TypeError', message: 'x is undefined' });
});
