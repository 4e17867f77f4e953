// `http-proxy`: node-http-proxy in front of the replica, as its own process — the classic Node
// reverse proxy, with a keep-alive agent to the replica (without one it opens a connection per
// request). Settings: BENCH_REPLICA_URL (required).
import { Agent, createServer } from 'node:http';
import httpProxy from 'http-proxy';
import { announceReady, exitOnStop } from './lib/child-side.js';

const target = process.env['BENCH_REPLICA_URL']!;
const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY, maxFreeSockets: 1024, keepAliveMsecs: 30_000 });
const proxy = httpProxy.createProxyServer({ target, agent, xfwd: false });
proxy.on('error', (_err, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502);
  res.end();
});
const server = createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 130_000 }, (req, res) => proxy.web(req, res));
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  announceReady(typeof address === 'object' && address !== null ? address.port : 0);
});
exitOnStop(() => {
  server.closeAllConnections();
  server.close();
  agent.destroy();
});
