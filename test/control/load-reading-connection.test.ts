// The load reader's own HTTP client (src/control/service/load-fetch.ts) against a replica written
// on a raw socket, so that the test decides how each answer is framed and when a connection
// closes: the request a reading sends, readings kept alive on one connection (closed with the
// gateway), a replica that closes the idle connection between readings (each next reading
// reconnects and succeeds), a
// chunked exposition whose lines are split across chunks, and a body over 1 MiB delimited by the
// connection's close (no Content-Length: the reading fails at the byte past the limit and the
// connection is dropped).
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/wait.js';

const WAITING = 'vllm:num_requests_waiting';

type Mode = 'keep' | 'close-after' | 'chunked' | 'huge-close';

interface RawReplica {
  url: string;
  mode: Mode;
  /** Connections accepted, and GET /metrics requests received. */
  connections: number;
  /** Connections open now. */
  openNow(): number;
  scrapes: number;
  /** The head of the first GET /metrics. */
  firstHead: string;
  /** `huge-close` answers whose connection closed before the whole body was written. */
  cut: number;
  close(): Promise<void>;
}

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

/** A replica on a raw socket: GET /metrics answers as `mode` says, anything else 200 `ok`. */
async function rawReplica(mode: Mode): Promise<RawReplica> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    replica.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = '';
    socket.on('data', (data: Buffer) => {
      pending += data.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        if (head.startsWith('GET /metrics ')) metrics(socket, head);
        else socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      }
    });
  });
  const metrics = (socket: Socket, head: string): void => {
    replica.scrapes++;
    if (replica.firstHead === '') replica.firstHead = head;
    const text = `# TYPE ${WAITING} gauge\n${WAITING}{engine="0"} 2\n${WAITING}{engine="1"} 5\n`;
    switch (replica.mode) {
      case 'keep':
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${text.length}\r\n\r\n${text}`);
        return;
      case 'close-after':
        // A kept-alive answer (no `Connection: close`); the replica closes the connection while it
        // is idle, 20 ms later (its own pace), before the next reading 100 ms after this one.
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${text.length}\r\n\r\n${text}`);
        setTimeout(() => socket.end(), 20);
        return;
      case 'chunked': {
        // Lines and the metric's name split across chunks; the last line has no newline.
        const body = `# TYPE ${WAITING} gauge\n${WAITING}{engine="0"} 4\n${WAITING}{engine="1"} 6`;
        const cuts = [10, 30, 60, body.length];
        let out = 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n';
        let from = 0;
        for (const to of cuts) {
          out += `${(to - from).toString(16)}\r\n${body.slice(from, to)}\r\n`;
          from = to;
        }
        socket.write(`${out}0\r\n\r\n`);
        return;
      }
      case 'huge-close': {
        // Neither Content-Length nor chunked: the body ends with the connection. 8 MiB of
        // other lines, then the metric: only beyond the limit.
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n');
        const filler = Buffer.alloc(64 * 1024, `other_metric{a="b"} 1\n`);
        let sent = 0;
        const more = (): void => {
          while (sent < 8 * 1024 * 1024) {
            sent += filler.length;
            if (!socket.write(filler)) {
              socket.once('drain', more);
              return;
            }
          }
          socket.end(`${WAITING} 3\n`);
        };
        socket.on('close', () => {
          if (!socket.writableFinished) replica.cut++;
        });
        more();
        return;
      }
    }
  };
  const replica: RawReplica = {
    url: '',
    mode,
    connections: 0,
    openNow: () => sockets.size,
    scrapes: 0,
    firstHead: '',
    cut: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  replica.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  open.push(replica);
  return replica;
}

async function gateway(replica: RawReplica, intervalMs = 100): Promise<TestGateway> {
  const tg = await startTestGateway(rawService({ urls: [replica.url], load: { preset: 'vllm', intervalMs } }), { workers: 1 });
  open.push(tg);
  return tg;
}

const waiting = (tg: TestGateway): Promise<number | undefined> => metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-1"}');
const failures = (tg: TestGateway): Record<string, unknown>[] => tg.logs.filter((l) => String(l.msg).startsWith('load reading failed'));

test('a reading sends GET with Host, Accept, Accept-Encoding: identity and User-Agent sluice-load; readings share a kept-alive connection', async () => {
  const replica = await rawReplica('keep');
  const tg = await gateway(replica, 250);
  await eventually(async () => (await waiting(tg)) === 7, 10_000, 'the reading 2 + 5');
  const lines = replica.firstHead.split('\r\n');
  assert.equal(lines[0], 'GET /metrics HTTP/1.1');
  const fields = Object.fromEntries(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  assert.equal(fields['host'], new URL(replica.url).host);
  assert.match(fields['accept'] ?? '', /^text\/plain/);
  assert.equal(fields['accept-encoding'], 'identity');
  assert.equal(fields['user-agent'], 'sluice-load');
  const scrapes = replica.scrapes;
  await eventually(() => replica.scrapes >= scrapes + 4, 10_000, 'four more readings');
  assert.ok(replica.connections < replica.scrapes, `${replica.scrapes} readings over ${replica.connections} connections: kept alive`);
});

test("the gateway's close closes the reading's kept-alive connection", async () => {
  const replica = await rawReplica('keep');
  const tg = await startTestGateway(rawService({ urls: [replica.url], load: { preset: 'vllm', intervalMs: 100 } }), { workers: 1 });
  await eventually(async () => (await waiting(tg)) === 7, 10_000, 'the reading 2 + 5');
  assert.ok(replica.openNow() >= 1, 'the reading connection is open');
  await tg.close();
  await eventually(() => replica.openNow() === 0, 10_000, 'the connection closed');
});

test('a replica that closes the kept-alive connection between readings: each next reading reconnects and succeeds', async () => {
  const replica = await rawReplica('close-after');
  const tg = await gateway(replica);
  await eventually(() => replica.scrapes >= 10, 10_000, 'ten readings');
  assert.ok(replica.connections >= replica.scrapes, `${replica.scrapes} readings over ${replica.connections} connections: none carried two`);
  // Readings go on succeeding on new connections. A reading written just as the replica closes
  // may fail, as with any client (a loop stalled past the replica's 20 ms): at most one run of
  // failures, where a reader that wrote to a closed connection would fail every other reading.
  const scrapes = replica.scrapes;
  await eventually(async () => replica.scrapes >= scrapes + 2 && (await waiting(tg)) === 7, 10_000, 'a valid reading after two more');
  assert.ok(failures(tg).length <= 1, `${failures(tg).length} runs of failed readings: ${JSON.stringify(failures(tg).map((l) => l.problem))}`);
  assert.equal(tg.logs.filter((l) => l.level === 50).length, 0, 'nothing at error level');
});

test('a chunked exposition, its lines and the last one without a newline split across chunks, is read whole', async () => {
  const replica = await rawReplica('chunked');
  const tg = await gateway(replica);
  await eventually(async () => (await waiting(tg)) === 10, 10_000, 'the reading 4 + 6');
  const scrapes = replica.scrapes;
  await eventually(() => replica.scrapes >= scrapes + 3, 10_000, 'three more readings');
  assert.equal(await waiting(tg), 10);
  assert.deepEqual(failures(tg), []);
  assert.ok(replica.connections < replica.scrapes, 'the connection was kept after a chunked answer');
});

test('a body over 1 MiB delimited by the connection closing fails the reading at the limit and drops the connection', async () => {
  const replica = await rawReplica('huge-close');
  const tg = await gateway(replica);
  await eventually(() => failures(tg).length === 1 && replica.cut >= 1, 10_000, 'the reading failed and its connection was cut');
  assert.equal(failures(tg)[0]!.problem, 'larger than 1048576 bytes');
  assert.equal(await waiting(tg), undefined, 'the metric beyond the limit is not a reading');
  await eventually(() => replica.cut >= 3, 10_000, 'three readings cut');
  assert.equal(failures(tg).length, 1, 'logged once');
});
