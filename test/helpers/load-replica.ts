// A replica that says who it is and serves a Prometheus endpoint whose values the test sets, for
// the routing tests: real node:http, port 0.
//   GET  /metrics    vLLM's metric names with `waiting` (two engine series summing to it; with
//                    `batch`, the /hold requests beyond `batch`) and `cacheUsage`, or what
//                    `metrics` says: `fail` (500), `hang` (never answers),
//                    `garbage` (a body without the metric), `reset` (the connection is destroyed)
//   POST /hold       200 and `<name>` at once, the end when `release()` is called
//   anything else    200 `<name>` once the body is in; the request's headers are kept in `seen`;
//                    or, as `answers` says: `stuck` (never answers, keeps the connection) or
//                    `reset` (the connection is destroyed once the request is in)
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type MetricsMode = 'ok' | 'fail' | 'hang' | 'garbage' | 'reset';
export type AnswerMode = 'ok' | 'stuck' | 'reset';

export interface LoadReplica {
  name: string;
  url: string;
  /** What /metrics says is waiting; with `batch` set, the held requests beyond it instead. */
  waiting: number;
  /** Requests the replica "runs" at once: /hold requests beyond this count as waiting. */
  batch: number | undefined;
  cacheUsage: number;
  metrics: MetricsMode;
  /** How relayed requests are answered. */
  answers: AnswerMode;
  /** GET /metrics requests received. */
  scrapes: number;
  /** Relayed requests received (not /metrics), in arrival order: path and headers. */
  seen: { path: string; headers: IncomingMessage['headers'] }[];
  /** /hold requests waiting for `release()`. */
  holding(): number;
  /** `hang` readings whose connection is still open (the reader has not given up yet). */
  hangingOpen(): number;
  release(): void;
  close(): Promise<void>;
}

export function exposition(waiting: number, cacheUsage: number): string {
  const a = Math.floor(waiting / 2);
  return [
    '# HELP vllm:num_requests_running Number of requests in model execution batches.',
    '# TYPE vllm:num_requests_running gauge',
    'vllm:num_requests_running{engine="0",model_name="m"} 4.0',
    '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
    '# TYPE vllm:num_requests_waiting gauge',
    `vllm:num_requests_waiting{engine="0",model_name="m"} ${a}.0`,
    `vllm:num_requests_waiting{engine="1",model_name="m"} ${waiting - a}.0`,
    '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
    '# TYPE vllm:kv_cache_usage_perc gauge',
    `vllm:kv_cache_usage_perc{engine="0",model_name="m"} ${cacheUsage}`,
    '',
  ].join('\n');
}

export async function startLoadReplica(name: string, waiting = 0, cacheUsage = 0): Promise<LoadReplica> {
  const held: ServerResponse[] = [];
  const hanging: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const replica: LoadReplica = {
    name,
    url: '',
    waiting,
    batch: undefined,
    cacheUsage,
    metrics: 'ok',
    answers: 'ok',
    scrapes: 0,
    seen: [],
    holding: () => held.length,
    hangingOpen: () => hanging.filter((res) => !res.destroyed && !res.closed).length,
    release: () => {
      for (const res of held.splice(0)) res.end(' done');
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging.splice(0)) res.destroy();
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      replica.scrapes++;
      switch (replica.metrics) {
        case 'ok':
          const waiting = replica.batch === undefined ? replica.waiting : Math.max(0, held.length - replica.batch);
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(exposition(waiting, replica.cacheUsage));
          return;
        case 'fail':
          res.writeHead(500).end('boom');
          return;
        case 'hang':
          hanging.push(res);
          return;
        case 'garbage':
          res.writeHead(200, { 'content-type': 'text/plain' }).end('# nothing here\nvllm:num_requests_waiting_total 3\n{{{ not prometheus\n');
          return;
        case 'reset':
          req.socket.destroy();
          return;
      }
    }
    replica.seen.push({ path: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      if (replica.answers === 'stuck') {
        hanging.push(res);
        return;
      }
      if (replica.answers === 'reset') {
        req.socket.destroy();
        return;
      }
      if (req.url === '/hold') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write(name);
        held.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(name) }).end(name);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  replica.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return replica;
}
