// `otlp-sink`: a collector that takes every OTLP/HTTP export and drops it (200, empty body), run
// as its own process for the tracing peers (`sluice-trace-1pct`, `sluice-trace-all`), so a relay's
// export costs what it costs against a collector that keeps up, and the sink's CPU is not theirs.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { announceReady, exitOnStop } from './lib/child-side.js';

let exports = 0;
const server = createServer((req, res) => {
  let bytes = 0;
  req.on('data', (c: Buffer) => (bytes += c.length));
  req.on('end', () => {
    exports += bytes > 0 ? 1 : 0;
    res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => announceReady((server.address() as AddressInfo).port));
exitOnStop(async () => {
  process.stderr.write(`otlp-sink: ${exports} exports\n`);
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
