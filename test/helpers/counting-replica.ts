// A replica that records everything that reaches it, for "nothing reaches the replica" checks:
// every TCP connection (even one that never completes a request head), every byte, and every
// request with its raw headers and body (`complete` false when the body was cut short).
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { rawService, startTestGateway, type TestGateway } from './gateway.js';

export interface ReceivedRequest {
  method: string;
  url: string;
  /** Raw name/value pairs, in arrival order, names as sent. */
  rawHeaders: string[];
  body: Buffer;
  complete: boolean;
}

export interface CountingReplica {
  url: string;
  server: Server;
  /** Connections accepted so far. */
  connections(): number;
  /** Bytes read so far on every connection (open ones included). */
  bytes(): number;
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

/** Answers every request `200` with `{"ok":true}` once its body is in. */
export async function startCountingReplica(): Promise<CountingReplica> {
  const sockets = new Set<Socket>();
  let connections = 0;
  let closedBytes = 0;
  const requests: ReceivedRequest[] = [];
  const server = createServer((req, res) => {
    const record: ReceivedRequest = { method: req.method!, url: req.url!, rawHeaders: req.rawHeaders, body: Buffer.alloc(0), complete: false };
    requests.push(record);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      record.body = Buffer.concat(chunks);
    });
    req.on('end', () => {
      record.complete = true;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    req.on('error', () => undefined);
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => {
      closedBytes += socket.bytesRead;
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    connections: () => connections,
    bytes: () => [...sockets].reduce((sum, s) => sum + s.bytesRead, closedBytes),
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A counting replica with a test gateway in front of it, and the relay path prefix of its service. */
export interface CountingSetup {
  replica: CountingReplica;
  tg: TestGateway;
  /** `{basePath}/{slug}/request`: a path here is relayed as what follows. */
  base: string;
  close(): Promise<void>;
}

/** `service`: more of the service's config (its `urls` are the counting replica's). */
export async function startCountingGateway(service: Record<string, unknown> = {}): Promise<CountingSetup> {
  const replica = await startCountingReplica();
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, service));
  return {
    replica,
    tg,
    base: new URL(tg.url('/')).pathname.slice(0, -1),
    close: async () => {
      await tg.close();
      await replica.close();
    },
  };
}
