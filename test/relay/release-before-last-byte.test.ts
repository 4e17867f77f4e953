// A replica's slot is free before the caller has the last byte of its answer (docs/api.md#cold-start-and-the-queue):
// a caller that sends its next request at once on a new connection — which another worker thread
// may take — finds the replica free. With one request at a time allowed, each request here waits
// not at all (`X-Sluice-Max-Wait-Ms: 0`): a slot still held by the thread that relayed the previous
// answer would make it a `503 no_replica`.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { startReplica, type TestReplica } from '../helpers/replica.js';

let replica: TestReplica;
let tg: TestGateway;

before(async () => {
  replica = await startReplica((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
  tg = await startTestGateway(rawService({ urls: [replica.url], concurrency: 1 }), { workers: 2 });
});

after(async () => {
  await tg.close();
  await replica.close();
});

/** A connection opened ahead, so that the next request goes out the moment the last answer is complete. */
async function opened(port: number): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1' });
  await once(socket, 'connect');
  return socket;
}

/** Sends `request` on `socket`; resolves with the status once the answer (Content-Length 11 or an error) is whole. */
function exchange(socket: Socket, request: string): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, end));
      if (length !== null && text.length - end - 4 < Number(length[1])) return;
      socket.removeAllListeners('data');
      socket.destroy();
      resolve(text.slice(9, 12));
    });
    socket.write(request);
  });
}

test('sequential requests, each on a new connection, never find the replica busy', async () => {
  const path = new URL(tg.url('/next')).pathname;
  const request = `POST ${path} HTTP/1.1\r\nhost: x\r\nauthorization: ${AUTH.authorization}\r\nx-sluice-max-wait-ms: 0\r\ncontent-length: 2\r\n\r\n{}`;
  const statuses = new Map<string, number>();
  let next = await opened(tg.port);
  for (let i = 0; i < 400; i++) {
    const socket = next;
    const opening = opened(tg.port);
    const status = await exchange(socket, request);
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    next = await opening;
  }
  next.destroy();
  assert.deepEqual([...statuses], [['200', 400]]);
});
