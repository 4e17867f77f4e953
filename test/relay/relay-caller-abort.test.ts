// The caller goes away (docs/api.md#what-the-caller-receives): the upstream request is aborted at once — the
// replica sees its connection close before it finished answering — and the request is logged
// as status 499, outcome client_closed. Two moments: mid-stream (the replica streams forever
// until closed) and before the status line (the replica holds its answer).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { TEST_TOKEN, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually, within } from '../helpers/wait.js';

/** Only a guard against hanging: the abort is expected within milliseconds. */
const HANG_GUARD_MS = 5_000;

interface ReplicaClose {
  /** `res.writableEnded` when the connection closed: false means the answer was cut short. */
  writableEnded: boolean;
  at: number;
}

interface ReplicaCall {
  url: string;
  requestId: string;
  closed: Promise<ReplicaClose>;
}

describe('the caller goes away', () => {
  let replica: TestReplica;
  let tg: TestGateway;
  let agent: Agent;
  /** Every request the replica got, in order; `arrived` wakes whoever waits for the next one. */
  const calls: ReplicaCall[] = [];
  let arrived: ((call: ReplicaCall) => void) | undefined;

  before(async () => {
    replica = await startReplica(async (req, res) => {
      const closed = new Promise<ReplicaClose>((resolve) => {
        res.once('close', () => resolve({ writableEnded: res.writableEnded, at: performance.now() }));
      });
      const call: ReplicaCall = { url: req.url!, requestId: String(req.headers['x-request-id']), closed };
      calls.push(call);
      await readBody(req);
      arrived?.(call);
      if (req.url === '/stream') {
        // Server-sent events, one every 20 ms, until the connection closes.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let n = 0;
        const timer = setInterval(() => res.write(`data: {"n":${n++}}\n\n`), 20);
        res.once('close', () => clearInterval(timer));
        res.write(`data: {"n":${n++}}\n\n`);
      }
      // `/hold`: never answers; the connection stays open until someone closes it.
    });
    tg = await startTestGateway(rawService({ urls: [replica.url] }));
    agent = new Agent();
  });

  after(async () => {
    await agent?.close();
    await tg?.close();
    await replica?.close();
  });

  function nextCall(): Promise<ReplicaCall> {
    return new Promise((resolve) => {
      arrived = (call) => {
        arrived = undefined;
        resolve(call);
      };
    });
  }

  async function accessLog(requestId: string): Promise<Record<string, unknown>> {
    const find = () => tg.logs.find((l) => l['reqId'] === requestId && l['msg'] === 'request');
    await eventually(() => find() !== undefined, HANG_GUARD_MS, `the access log line of ${requestId}`);
    return find()!;
  }

  test('mid-stream: the replica sees its request aborted, and the log says 499 client_closed', async () => {
    const path = new URL(tg.url('/stream')).pathname;
    const replicaCall = nextCall();
    const socket = connect(tg.port, '127.0.0.1');
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${tg.port}\r\nAuthorization: Bearer ${TEST_TOKEN}\r\n` +
        'Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: 2\r\n\r\n{}',
    );
    // Read until the head and at least two events have arrived: the stream is flowing through.
    const received = await within(
      new Promise<string>((resolve, reject) => {
        let text = '';
        const onData = (chunk: Buffer): void => {
          text += chunk.toString('latin1');
          if ((text.match(/data: /g) ?? []).length >= 2) {
            socket.off('data', onData);
            resolve(text);
          }
        };
        socket.on('data', onData);
        socket.once('error', reject);
      }),
      HANG_GUARD_MS,
      'the first events',
    );
    assert.match(received, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(received, /\r\ntransfer-encoding: chunked\r\n/i);
    const callerId = /\r\nx-request-id: ([^\r]+)\r\n/i.exec(received)?.[1];
    assert.ok(callerId, 'the caller got an x-request-id');
    const call = await replicaCall;
    assert.equal(call.requestId, callerId, 'the replica got the same request id');

    const goneAt = performance.now();
    socket.destroy();

    const close = await within(call.closed, HANG_GUARD_MS, 'the replica to see the abort');
    assert.equal(close.writableEnded, false, 'the replica had not finished its answer: the upstream request was aborted');
    console.log(`mid-stream abort reached the replica after ${(close.at - goneAt).toFixed(1)} ms`);

    const line = await accessLog(callerId);
    assert.equal(line['status'], 499);
    assert.equal(line['outcome'], 'client_closed');
    assert.equal(line['path'], '/stream');
    assert.ok((line['bytesOut'] as number) > 0, 'some of the stream was relayed before the caller left');
  });

  test('before the status line: the replica holding its answer sees the abort, and the log says 499 client_closed', async () => {
    const controller = new AbortController();
    const replicaCall = nextCall();
    const pending = request(tg.url('/hold'), {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
      body: '{"prompt":"hold on"}',
      signal: controller.signal,
      dispatcher: agent,
    });
    pending.catch(() => {}); // rejected by the abort below; asserted there
    const call = await within(replicaCall, HANG_GUARD_MS, 'the request to reach the replica');

    const goneAt = performance.now();
    controller.abort();
    await assert.rejects(pending, (err: Error) => err.name === 'AbortError' || /abort/i.test(err.message));

    const close = await within(call.closed, HANG_GUARD_MS, 'the replica to see the abort');
    assert.equal(close.writableEnded, false, 'the replica never answered: the upstream request was aborted');
    console.log(`abort before the status line reached the replica after ${(close.at - goneAt).toFixed(1)} ms`);

    const line = await accessLog(call.requestId);
    assert.equal(line['status'], 499);
    assert.equal(line['outcome'], 'client_closed');
    assert.equal(line['path'], '/hold');
  });

  test('a caller that stops reading an undici body mid-stream: the replica sees the abort (and the gateway still serves after the aborts above)', async () => {
    const before = calls.length;
    const res = await request(tg.url('/stream'), {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
      body: '{}',
      dispatcher: agent,
    });
    assert.equal(res.statusCode, 200);
    // Read one event, then stop (this also exercises an abort through undici's body).
    for await (const chunk of res.body) {
      assert.match((chunk as Buffer).toString(), /^data: /);
      break;
    }
    const call = calls[before]!;
    assert.equal(call.requestId, res.headers['x-request-id']);
    assert.equal((await within(call.closed, HANG_GUARD_MS, 'the replica to see the abort')).writableEnded, false);
    const line = await accessLog(call.requestId);
    assert.equal(line['status'], 499);
    assert.equal(line['outcome'], 'client_closed');
  });
});
