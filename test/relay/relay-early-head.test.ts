// The replica's status line and headers reach the caller when the replica sends them, not with
// its first body bytes (docs/api.md#what-the-caller-receives): a replica that answers `200
// text/event-stream` at once and thinks before its first event. The replica holds each body until
// the test has seen the head at the caller, so a relay that holds the head deadlocks here and the
// guard releases the body first: the order of the two is the assertion.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { type ScriptedReplica, startScriptedReplica } from '../fixtures/scripted-replica.js';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { UWS_BUILD } from '../helpers/uws-timing.js';
import { eventually } from '../helpers/wait.js';

const EVENT = 'data: {"token":"hi"}\n\n';
const JSON_BODY = '{"ok":true}';

/** What the replica sends first, per path; the rest waits for `release`. */
const HEADS: Record<string, string> = {
  '/sse': 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nset-cookie: a=b\r\n\r\n',
  '/json': `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${JSON_BODY.length}\r\n\r\n`,
  '/sse-dies': 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n',
  '/json-dies': `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${JSON_BODY.length}\r\n\r\n{"o`,
};

let replica: ScriptedReplica;
let tg: TestGateway;
/** The replica's socket of the request in progress, and when it sent the head. */
let held: { socket: Socket; path: string; sentAt: number } | undefined;

before(async () => {
  replica = await startScriptedReplica((socket, req) => {
    socket.write(HEADS[req.target]!);
    held = { socket, path: req.target, sentAt: performance.now() };
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }));
});

after(async () => {
  await tg.close();
  await replica.close();
});

/** Sends the rest of the held answer: an event and the end, the JSON body, or a reset. */
function release(): void {
  const { socket, path } = held!;
  if (path === '/sse') socket.write(`${EVENT.length.toString(16)}\r\n${EVENT}\r\n0\r\n\r\n`);
  else if (path === '/json') socket.write(JSON_BODY);
  else socket.destroy();
}

interface Seen {
  order: string[];
  head: string;
  bytes: string;
  closed: boolean;
}

/**
 * A caller on a raw socket: records 'head' when the head is complete, 'released' when the guard let
 * the replica go on (or at once with `releaseFirst`).
 */
async function call(path: string, releaseFirst = false): Promise<Seen> {
  held = undefined;
  const seen: Seen = { order: [], head: '', bytes: '', closed: false };
  const socket = connect(tg.port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`POST ${new URL(tg.url(path)).pathname} HTTP/1.1\r\nhost: x\r\nauthorization: ${AUTH.authorization}\r\ncontent-length: 2\r\n\r\n{}`);
  await eventually(() => held !== undefined, 10_000, 'the request at the replica');
  let guard: NodeJS.Timeout | undefined;
  if (releaseFirst) {
    seen.order.push('released');
    release();
  }
  const headSeen = new Promise<void>((resolve) => {
    // Only if the head never comes on its own: the replica goes on, and the order shows it.
    if (!releaseFirst) {
      guard = setTimeout(() => {
        seen.order.push('released');
        release();
      }, 10_000);
    }
    socket.on('data', (chunk: Buffer) => {
      seen.bytes += chunk.toString('latin1');
      const end = seen.bytes.indexOf('\r\n\r\n');
      if (end >= 0 && seen.head === '') {
        seen.head = seen.bytes.slice(0, end);
        seen.order.push('head');
        console.log(`${path}: head at the caller ${(performance.now() - held!.sentAt).toFixed(1)} ms after the replica sent it`);
        resolve();
      }
    });
  });
  await headSeen;
  clearTimeout(guard);
  if (!seen.order.includes('released')) {
    seen.order.push('released');
    release();
  }
  const closed = once(socket, 'close');
  if (path === '/sse' || path === '/json') {
    const done = path === '/sse' ? '0\r\n\r\n' : JSON_BODY;
    await eventually(() => seen.bytes.endsWith(done), 10_000, 'the end of the answer');
    socket.end();
  }
  await closed;
  seen.closed = true;
  return seen;
}

test('an event stream: the status line, Content-Type and X-Request-Id reach the caller before the first event', async () => {
  const seen = await call('/sse');
  assert.deepEqual(seen.order, ['head', 'released']);
  assert.match(seen.head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(seen.head, /\r\ncontent-type: text\/event-stream/i);
  assert.match(seen.head, /\r\nx-request-id: [0-9a-f]+/i);
  assert.match(seen.head, /\r\ntransfer-encoding: chunked/i);
  assert.doesNotMatch(seen.head, /set-cookie/i);
  // The head went with one comment line (an empty chunk cannot carry it); then the event, and a clean end.
  const body = seen.bytes.slice(seen.head.length + 4);
  assert.equal(body, `2\r\n:\n\r\n${EVENT.length.toString(16)}\r\n${EVENT}\r\n0\r\n\r\n`);
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && String(l.path).endsWith('/sse')), 10_000, 'the access line');
  const line = tg.logs.find((l) => l.msg === 'request' && String(l.path).endsWith('/sse'))!;
  assert.equal(line.status, 200);
  assert.equal(line.events, 1);
});

// uws-pack's tryEnd can write a head alone; v20.57.0's ends the response when given no bytes, so there
// the head waits for the first body bytes (docs/api.md#when-the-status-line-goes-out).
test(`a Content-Length answer whose body comes later: ${UWS_BUILD.headAlone ? 'the head first, then the body' : 'the head with the first body bytes'}, with its length`, async () => {
  const seen = await call('/json', !UWS_BUILD.headAlone);
  assert.deepEqual(seen.order, UWS_BUILD.headAlone ? ['head', 'released'] : ['released', 'head']);
  assert.match(seen.head, /\r\ncontent-type: application\/json/i);
  assert.match(seen.head, /\r\ncontent-length: 11/i);
  assert.match(seen.head, /\r\nx-request-id: /i);
  assert.equal(seen.bytes.slice(seen.head.length + 4), JSON_BODY);
});

test('a stream whose replica dies after its head: the caller has the head, then a chunked body with no final chunk', async () => {
  const seen = await call('/sse-dies');
  assert.deepEqual(seen.order, ['head', 'released']);
  assert.match(seen.head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.ok(!seen.bytes.endsWith('0\r\n\r\n'), 'the answer must not end cleanly');
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && String(l.path).endsWith('/sse-dies')), 10_000, 'the access line');
  const line = tg.logs.find((l) => l.msg === 'request' && String(l.path).endsWith('/sse-dies'))!;
  assert.equal(line.status, 200);
  assert.equal(line.outcome, 'upstream_error');
});

test('a Content-Length answer cut short after its head and first bytes: a short body, never a clean end', async () => {
  const seen = await call('/json-dies');
  assert.deepEqual(seen.order, ['head', 'released']);
  assert.match(seen.head, /\r\ncontent-length: 11/i);
  assert.equal(seen.bytes.slice(seen.head.length + 4), '{"o');
});
