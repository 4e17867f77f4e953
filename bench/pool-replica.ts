// A simulated model server for the pool benchmark (bench/pool-swaps.ts), launched by the gateway
// (`replicas.command`) on a unit of a pool. It loads for LOAD_MS before it listens (a model
// loading into GPU memory), streams tokens, and takes EXIT_MS to exit after SIGTERM (a server
// freeing its GPU memory). It keeps a journal: one JSON line per event, each stamped on
// CLOCK_MONOTONIC (process.hrtime, shared by every process on Linux), so the parent can tell what
// the replica's own exit and start took from what the gateway added around them.
//   {"e":"start"}      the process started (Node's time origin, before the script ran)
//   {"e":"listening"}  the model is loaded: /health answers from now on
//   {"e":"recv","id"}  a request reached it; {"e":"first","id"} its first token written;
//   {"e":"done","id"}  its answer ended
//   {"e":"sigterm"}    asked to stop; {"e":"exit"} it exits now
//   POST /v1/chat/completions  {"model","max_tokens","bench_id"} → SSE: max_tokens chunks, the first
//                              at once, then one every TOKEN_MS, then `data: [DONE]`
//   GET /health                200 once listening
// Settings (env): PORT (set by Sluice), MODEL, POOL, UNITS ("{units}"), JOURNAL, LOAD_MS, EXIT_MS, TOKEN_MS.
import { appendFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';

const model = process.env['MODEL'] ?? '?';
// Units as `pool:unit` (unit numbers start from 0 in every pool).
const pool = process.env['POOL'] ?? '';
const units = (process.env['UNITS'] ?? '')
  .split(',')
  .filter((u) => u !== '')
  .map((u) => `${pool}:${u}`)
  .join(',');
const journal = process.env['JOURNAL'] ?? '';
const loadMs = Number(process.env['LOAD_MS'] ?? '0');
const exitMs = Number(process.env['EXIT_MS'] ?? '0');
const tokenMs = Number(process.env['TOKEN_MS'] ?? '20');

/** Milliseconds on CLOCK_MONOTONIC (µs resolution). */
function now(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

function note(e: string, t: number, id?: number): void {
  if (journal === '') return;
  appendFileSync(journal, `${JSON.stringify({ e, m: model, pid: process.pid, u: units, t, ...(id === undefined ? {} : { id }) })}\n`);
}

// performance.now() counts from Node's start: the process's start on the shared clock.
note('start', now() - performance.now());

function stream(res: ServerResponse, id: number, tokens: number): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let i = 0;
  const next = (): void => {
    if (res.destroyed) return;
    res.write(`data: {"object":"chat.completion.chunk","model":"${model}","i":${i},"choices":[{"index":0,"delta":{"content":"t${i} "}}]}\n\n`);
    if (i === 0) note('first', now(), id);
    i++;
    if (i < tokens) {
      setTimeout(next, tokenMs);
      return;
    }
    res.end('data: [DONE]\n\n');
    note('done', now(), id);
  };
  next();
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/health') {
    res.end('ok');
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: { max_tokens?: unknown; bench_id?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString()) as typeof body;
    } catch {
      res.writeHead(400).end('bad json');
      return;
    }
    const id = Number(body.bench_id ?? -1);
    note('recv', now(), id);
    stream(res, id, Math.max(1, Number(body.max_tokens ?? 1)));
  });
});
server.keepAliveTimeout = 60_000;

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  note('sigterm', now());
  server.close();
  setTimeout(() => {
    note('exit', now());
    process.exit(0);
  }, exitMs);
});

// A replica outlives nobody: if the gateway is gone (killed), it goes too.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 500).unref();

setTimeout(() => {
  server.listen(Number(process.env['PORT']), '127.0.0.1', () => note('listening', now()));
}, loadMs);
