// A replica whose Prometheus endpoint is hostile (or merely huge), for the load reader's tests and
// bench/hostile-metrics.ts: real node:http, port 0. GET /metrics answers, per `mode`:
//   line        one line of `bytes` bytes (the waiting metric's name repeated in it), chunked,
//               written with backpressure
//   late        short histogram-like lines for `bytes` bytes, then a valid waiting sample: the
//               metric only beyond the first `bytes`; chunked
//   late-length the same with a Content-Length
//   long-line   a valid-looking waiting sample on a line of 5 KiB (a label padded), then nothing
//   small       a small valid exposition (waiting 1)
// Anything else: 200 `<name>` once the body is in, `delayMs` later.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type HostileMode = 'line' | 'late' | 'late-length' | 'long-line' | 'small';

export interface HostileReplica {
  url: string;
  mode: HostileMode;
  /** The size of the `line` and `late` bodies. */
  bytes: number;
  /** GET /metrics requests received. */
  scrapes: number;
  /** /metrics responses whose connection closed before the whole body was written. */
  cut: number;
  /** How long other requests take, after their body is in (a slow model server). */
  delayMs: number;
  close(): Promise<void>;
}

const WAITING = 'vllm:num_requests_waiting';
const SMALL = `# TYPE ${WAITING} gauge\n${WAITING}{engine="0"} 1\n`;
const CHUNK = 64 * 1024;

export async function startHostileReplica(name: string, mode: HostileMode, bytes = 8 * 1024 * 1024): Promise<HostileReplica> {
  const sockets = new Set<Socket>();
  // Bodies are built once: the replica must not be what costs CPU.
  const lineChunk = Buffer.alloc(CHUNK);
  const unit = Buffer.from(`${WAITING}{engine="0"} 7 `, 'latin1');
  for (let i = 0; i < CHUNK; i += unit.length) unit.copy(lineChunk, i);
  const lateChunk = Buffer.alloc(CHUNK);
  const lateUnit = Buffer.from(`vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 17\n`, 'latin1');
  for (let i = 0; i + lateUnit.length <= CHUNK; i += lateUnit.length) lateUnit.copy(lateChunk, i);
  lateChunk.fill(0x0a, CHUNK - (CHUNK % lateUnit.length));
  const replica: HostileReplica = {
    url: '',
    mode,
    bytes,
    scrapes: 0,
    cut: 0,
    delayMs: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const stream = (res: ServerResponse, chunk: Buffer, total: number, tail: string): void => {
    let sent = 0;
    const more = (): void => {
      while (sent < total) {
        const n = Math.min(chunk.length, total - sent);
        sent += n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          res.once('drain', more);
          return;
        }
      }
      res.end(tail);
    };
    res.on('close', () => {
      if (!res.writableFinished) replica.cut++;
    });
    more();
  };
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      replica.scrapes++;
      const bytes = replica.bytes;
      switch (replica.mode) {
        case 'line':
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
          stream(res, lineChunk, bytes, '\n');
          return;
        case 'late':
        case 'late-length': {
          const tail = `${WAITING}{engine="0"} 3\n`;
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', ...(replica.mode === 'late-length' ? { 'content-length': bytes + tail.length } : {}) });
          stream(res, lateChunk, bytes, tail);
          return;
        }
        case 'long-line':
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(`# TYPE ${WAITING} gauge\n${WAITING}{pad="${'x'.repeat(5 * 1024)}"} 5\n`);
          return;
        case 'small':
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(SMALL);
          return;
      }
    }
    req.resume();
    const answer = (): void => void res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(name) }).end(name);
    req.on('end', () => (replica.delayMs > 0 ? setTimeout(answer, replica.delayMs) : answer()));
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  replica.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return replica;
}
