// `bare`: the least a relay on this stack can do — uWS in, undici out, no auth, no header policy,
// no logs, no metrics, no backpressure — as the upper bound Sluice is compared with.
// Settings: BENCH_REPLICA_URL (required).
import { STATUS_CODES } from 'node:http';
import { type Dispatcher, Pool } from 'undici';
import * as uWS from 'uWebSockets.js';
import { announceReady, exitOnStop } from './lib/child-side.js';

const pool = new Pool(process.env['BENCH_REPLICA_URL']!, { pipelining: 1, connections: null, keepAliveTimeout: 30_000 });
const app = uWS.App().any('/*', (res, req) => {
  const method = req.getMethod().toUpperCase() as Dispatcher.HttpMethod;
  const query = req.getQuery();
  const path = query ? `${req.getUrl()}?${query}` : req.getUrl();
  const headers = ['content-type', req.getHeader('content-type')];
  let aborted = false;
  let ended = false;
  let total = -1;
  let status = '200 OK';
  let contentType: string | undefined;
  res.onAborted(() => (aborted = true));
  const parts: Buffer[] = [];
  res.onData((ab, isLast) => {
    parts.push(Buffer.copyBytesFrom(new Uint8Array(ab)));
    if (!isLast) return;
    const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    pool.dispatch({ method, path, headers, body }, {
      onRequestStart() {}, // its presence selects undici's controller-style handler API
      onResponseStart(_c, code, h) {
        status = `${code} ${STATUS_CODES[code] ?? ''}`;
        total = h['content-length'] === undefined ? -1 : Number(h['content-length']);
        contentType = h['content-type'] as string | undefined;
      },
      onResponseData(_c, chunk) {
        if (aborted || ended) return;
        res.cork(() => {
          if (status !== '') res.writeStatus(status).writeHeader('content-type', contentType ?? 'application/octet-stream');
          status = '';
          if (total < 0) res.write(chunk);
          else ended = res.tryEnd(chunk, total)[1];
        });
      },
      onResponseEnd() {
        if (!aborted && !ended) res.cork(() => (status !== '' ? res.writeStatus(status).end() : res.end()));
        ended = true;
      },
      onResponseError() {
        if (!aborted && !ended) res.cork(() => res.writeStatus('502 Bad Gateway').end());
        ended = true;
      },
    });
  });
});

app.listen('127.0.0.1', 0, (socket) => {
  if (socket === false) {
    process.stderr.write('bench bare relay: cannot listen\n');
    process.exit(1);
  }
  announceReady(uWS.us_socket_local_port(socket));
});
exitOnStop(() => pool.close());
