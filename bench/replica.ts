// `direct`: a minimal fast replica on node:http, run as its own process by the benchmark.
//   POST /v1/infer (any path but /v1/stream) → 200, a small JSON body with Content-Length, keep-alive.
//   POST /v1/stream?tokens=N&gap_ms=G → 200 text/event-stream: N events, the first after G ms and
//     then one every G ms, then `data: [DONE]`. Each event carries `t`, the replica's
//     process.hrtime.bigint() when it was written: the clock is CLOCK_MONOTONIC, shared by every
//     process on Linux, so the client can measure each token's delivery time across processes.
// Settings: BENCH_REPLICA_PORT (default 0: any free port).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { announceReady, exitOnStop } from './lib/child-side.js';
import { INFER_ANSWER, STREAM_PATH } from './lib/workload.js';

const ANSWER = Buffer.from(INFER_ANSWER);
const ANSWER_HEADERS = { 'content-type': 'application/json', 'content-length': String(ANSWER.length) };
const STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
const DONE = 'data: [DONE]\n\n';

function streamTokens(res: ServerResponse, tokens: number, gapMs: number): void {
  res.writeHead(200, STREAM_HEADERS);
  res.flushHeaders();
  let i = 0;
  const next = (): void => {
    if (res.destroyed) return;
    if (i === tokens) {
      res.end(DONE);
      return;
    }
    res.write(`data: {"i":${i},"t":"${process.hrtime.bigint()}"}\n\n`);
    i += 1;
    setTimeout(next, gapMs);
  };
  setTimeout(next, gapMs);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  // Read (and drop) the whole body before answering, like a real replica.
  req.on('data', noop);
  req.on('end', () => {
    const url = req.url ?? '/';
    if (url.startsWith(STREAM_PATH)) {
      const q = new URLSearchParams(url.slice(url.indexOf('?') + 1));
      streamTokens(res, Number(q.get('tokens') ?? 20), Number(q.get('gap_ms') ?? 10));
      return;
    }
    res.writeHead(200, ANSWER_HEADERS);
    res.end(ANSWER);
  });
}

function noop(): void {}

const server = createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 130_000 }, handle);
server.listen(Number(process.env['BENCH_REPLICA_PORT'] ?? 0), '127.0.0.1', () => {
  const address = server.address();
  announceReady(typeof address === 'object' && address !== null ? address.port : 0);
});
exitOnStop(() => {
  server.closeAllConnections();
  server.close();
});
