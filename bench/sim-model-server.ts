// A simulated batching model server (bench/lib/batching-engine.ts) behind an OpenAI-style
// streaming route, run as its own process by the routing simulation (bench/routing.ts).
//   POST /v1/chat/completions  {"session","prompt_tokens","max_tokens"} → SSE, one `data:` event
//                              per generated token, then `data: [DONE]`
//   GET  /metrics              vLLM's names: vllm:num_requests_waiting, vllm:kv_cache_usage_perc
//   GET  /stats                the engine's counters (JSON), for the report
//   GET  /health               200
// Settings: BENCH_SIM_SPEC, the engine's EngineSpec as JSON.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BatchingEngine, type EngineSpec, type TokenSink } from './lib/batching-engine.js';
import { announceReady, exitOnStop } from './lib/child-side.js';

const spec = JSON.parse(process.env['BENCH_SIM_SPEC'] ?? '') as EngineSpec;
const engine = new BatchingEngine(spec);
const STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

function metrics(): string {
  const labels = `{engine="0",model_name="sim-${spec.name}"}`;
  return [
    '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
    '# TYPE vllm:num_requests_waiting gauge',
    `vllm:num_requests_waiting${labels} ${engine.waitingCount}.0`,
    '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
    '# TYPE vllm:kv_cache_usage_perc gauge',
    `vllm:kv_cache_usage_perc${labels} ${engine.kvUsage.toFixed(4)}`,
    '',
  ].join('\n');
}

class ResponseSink implements TokenSink {
  gone = false;
  constructor(private readonly res: ServerResponse) {
    res.on('close', () => {
      if (!res.writableFinished) this.gone = true;
    });
  }
  token(index: number): void {
    if (index === 0) this.res.writeHead(200, STREAM_HEADERS);
    this.res.write(`data: {"i":${index}}\n\n`);
  }
  end(): void {
    this.res.end('data: [DONE]\n\n');
  }
}

const server = createServer((req, res) => {
  if (req.method === 'GET') {
    if (req.url === '/metrics') res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metrics());
    else if (req.url === '/stats') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(engine.stats));
    else if (req.url === '/health') res.end('ok');
    else res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let body: { session?: unknown; prompt_tokens?: unknown; max_tokens?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString()) as typeof body;
    } catch {
      res.writeHead(400).end('bad json');
      return;
    }
    engine.submit(String(body.session ?? ''), Number(body.prompt_tokens ?? 0), Number(body.max_tokens ?? 1), new ResponseSink(res));
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => announceReady((server.address() as AddressInfo).port));
exitOnStop(() => {
  server.closeAllConnections();
  server.close();
});
