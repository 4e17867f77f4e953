// Token streaming without timing assumptions: the replica sends token k+1 only after the caller
// has received token k. A relay that buffers (waits for more bytes, or for the end) deadlocks here,
// and the hang guard fails the test.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';

const TOKENS = 20;
let replica: TestReplica;
let tg: TestGateway;
/** Resolved by the caller each time it has received a token: the replica's permission to go on. */
let received: (() => void) | undefined;

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    const sse = req.url === '/v1/sse';
    res.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/octet-stream' });
    for (let k = 0; k < TOKENS; k++) {
      const ack = new Promise<void>((resolve) => (received = resolve));
      // Small writes, as a model server flushes one token at a time.
      res.write(sse ? `data: {"token":${k}}\n\n` : `t${k};`);
      await ack;
    }
    res.end(sse ? 'data: [DONE]\n\n' : 'end');
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }));
});

after(async () => {
  await tg.close();
  await replica.close();
});

async function lockstep(path: string, tokenPattern: (k: number) => string, last: string): Promise<void> {
  const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(res.statusCode, 200);
  let text = '';
  let next = 0;
  const guard = setTimeout(() => res.body.destroy(new Error(`stalled after ${next} tokens: the relay buffers`)), 20_000);
  try {
    for await (const chunk of res.body) {
      text += (chunk as Buffer).toString();
      while (next < TOKENS && text.includes(tokenPattern(next))) {
        next += 1;
        received?.();
      }
    }
  } finally {
    clearTimeout(guard);
  }
  assert.equal(next, TOKENS);
  assert.ok(text.endsWith(last));
}

test('each token reaches the caller before the replica sends the next (chunked SSE)', async () => {
  await lockstep('/v1/sse', (k) => `data: {"token":${k}}\n\n`, 'data: [DONE]\n\n');
});

test('each token reaches the caller before the replica sends the next (plain chunked bytes)', async () => {
  await lockstep('/v1/raw', (k) => `t${k};`, 'end');
});

test('a raw-socket caller sees the first token before the replica sends the second', async () => {
  // Checks the framing on the wire too: chunked, and only the allowed headers.
  const { connect } = await import('node:net');
  const socket = connect(tg.port, '127.0.0.1');
  await once(socket, 'connect');
  const path = new URL(tg.url('/v1/sse')).pathname;
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH.authorization}\r\nContent-Length: 2\r\n\r\n{}`);
  let wire = '';
  for await (const chunk of socket) {
    wire += (chunk as Buffer).toString();
    if (wire.includes('data: {"token":0}')) break;
  }
  assert.match(wire, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(wire, /\r\ntransfer-encoding: chunked\r\n/i);
  assert.match(wire, /\r\ncontent-type: text\/event-stream\r\n/i);
  socket.destroy();
});
