// `direct`: a minimal fast replica on node:http, run as its own process by the benchmark (and,
// for the cold-start scenario, launched by the gateway as a service's replica).
//   POST /v1/infer (any other path) → 200, 1 KiB of JSON with Content-Length, keep-alive.
//   POST /v1/stream?tokens=N&gap_ms=G → 200 text/event-stream: N events, the first after a
//     random part of G ms (so 1,000 streams do not tick together), then one every G ms, then
//     `data: [DONE]`. With `&batch=1`, as a batching model server does: one clock per G ticks
//     every G ms and writes the next token to every open stream of that G at once (a burst of
//     as many small writes as streams), the first at the stream's first tick. Each event carries
//     `t`, the replica's process.hrtime.bigint() when it was written: CLOCK_MONOTONIC, which on
//     Linux every process shares, so the client measures each token's delivery across processes
//     on one clock.
//   GET /v1/blob?bytes=N → N bytes, written as fast as the reader takes them (backpressure).
//   POST /v1/idle → SSE headers and one comment, then nothing until the caller leaves.
//   GET /ready → 200 (the readiness probe of a launched replica).
//   GET /metrics → Prometheus text: bench_waiting 0, bench_cache_usage 0.1 (what Sluice's
//     `replicas.load` reads, as from a model server).
// Settings: PORT (set by the gateway when it launches this), else BENCH_REPLICA_PORT (default 0);
// BENCH_REPLICA_STARTUP_MS: wait this long before listening (a model load);
// BENCH_COLD_STATS: a file where the replica writes, when the first non-probe request arrives,
// when it answered its first readiness probe, when it accepted the first connection after that
// and when that request was read (µs, CLOCK_MONOTONIC). A burst of queued requests opens hundreds
// of connections at once: Node accepts them all before it reads any, so the first accepted
// connection is when the first queued request reached the replica, and the first request read
// includes the replica's own accept work. BENCH_PAUSES_FILE: record garbage collections and event
// loop delay (bench/pauses.ts).
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { announceReady, exitOnStop } from './lib/child-side.js';
import { recordPausesIfAsked } from './lib/pause-recorder.js';
import { BLOB_PATH, IDLE_PATH, INFER_ANSWER, METRICS_PATH, METRICS_TEXT, READY_PATH, STREAM_PATH } from './lib/workload.js';

const ANSWER = Buffer.from(INFER_ANSWER);
const ANSWER_HEADERS = { 'content-type': 'application/json', 'content-length': String(ANSWER.length) };
const STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
const DONE = 'data: [DONE]\n\n';
const BLOB_CHUNK = Buffer.alloc(64 * 1024, 0x61);

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
const statsFile = process.env['BENCH_COLD_STATS'];
let readyAnsweredUs = 0;
let firstConnectionUs = 0;
let firstRequestUs = 0;

function query(url: string): URLSearchParams {
  const q = url.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
}

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
  setTimeout(next, Math.random() * gapMs);
}

/** One open stream of a batch: how many tokens it still wants. */
interface BatchStream {
  res: ServerResponse;
  left: number;
  sent: number;
}

/** gap_ms → the streams its clock writes to, and the clock. */
const batches = new Map<number, { streams: Set<BatchStream>; timer: NodeJS.Timeout }>();

function tick(gapMs: number): void {
  const batch = batches.get(gapMs)!;
  for (const s of batch.streams) {
    if (s.res.destroyed) {
      batch.streams.delete(s);
      continue;
    }
    if (s.left === 0) {
      s.res.end(DONE);
      batch.streams.delete(s);
      continue;
    }
    s.res.write(`data: {"i":${s.sent},"t":"${process.hrtime.bigint()}"}\n\n`);
    s.sent += 1;
    s.left -= 1;
  }
  if (batch.streams.size === 0) {
    clearInterval(batch.timer);
    batches.delete(gapMs);
  }
}

function streamBatched(res: ServerResponse, tokens: number, gapMs: number): void {
  res.writeHead(200, STREAM_HEADERS);
  res.flushHeaders();
  let batch = batches.get(gapMs);
  if (batch === undefined) {
    batch = { streams: new Set(), timer: setInterval(tick, gapMs, gapMs) };
    batches.set(gapMs, batch);
  }
  batch.streams.add({ res, left: tokens, sent: 0 });
}

function streamBlob(res: ServerResponse, bytes: number): void {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes) });
  let left = bytes;
  const pump = (): void => {
    while (left > 0) {
      const chunk = left >= BLOB_CHUNK.length ? BLOB_CHUNK : BLOB_CHUNK.subarray(0, left);
      left -= chunk.length;
      if (left === 0) {
        res.end(chunk);
        return;
      }
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

function recordFirstRequest(): void {
  if (statsFile === undefined || firstRequestUs !== 0) return;
  firstRequestUs = nowUs();
  writeFileSync(statsFile, JSON.stringify({ pid: process.pid, readyAnsweredUs, firstConnectionUs, firstRequestUs }));
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  if (url === READY_PATH) {
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
    if (readyAnsweredUs === 0) readyAnsweredUs = nowUs();
    return;
  }
  if (url === METRICS_PATH) {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(METRICS_TEXT);
    return;
  }
  recordFirstRequest();
  // Read (and drop) the whole body before answering, like a real replica.
  req.on('data', noop);
  req.on('end', () => {
    if (url.startsWith(STREAM_PATH)) {
      const q = query(url);
      const stream = q.get('batch') === '1' ? streamBatched : streamTokens;
      stream(res, Number(q.get('tokens') ?? 20), Number(q.get('gap_ms') ?? 10));
    } else if (url.startsWith(BLOB_PATH)) {
      streamBlob(res, Number(query(url).get('bytes') ?? 1024));
    } else if (url.startsWith(IDLE_PATH)) {
      res.writeHead(200, STREAM_HEADERS);
      res.write(': open\n\n');
    } else {
      res.writeHead(200, ANSWER_HEADERS);
      res.end(ANSWER);
    }
  });
}

function noop(): void {}

const server = createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 130_000 }, handle);
server.on('connection', () => {
  if (readyAnsweredUs !== 0 && firstConnectionUs === 0) firstConnectionUs = nowUs();
});
const port = Number(process.env['PORT'] || process.env['BENCH_REPLICA_PORT'] || 0);
const startupMs = Number(process.env['BENCH_REPLICA_STARTUP_MS'] || 0);
setTimeout(() => {
  server.listen(port, '127.0.0.1', () => {
    const address = server.address();
    announceReady(typeof address === 'object' && address !== null ? address.port : 0);
  });
}, startupMs);
const writePauses = recordPausesIfAsked();
exitOnStop(() => {
  writePauses?.();
  server.closeAllConnections();
  server.close();
});
