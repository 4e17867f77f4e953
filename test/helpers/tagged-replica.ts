// A replica run by the test itself (someone else's pod, as an HPA or a person would add one): a
// node:http server that says who it is and records every request, for "which replica served"
// and "nothing reached this one" checks.
//   GET  /health     200 (503 while `healthy` is false): the readiness path of the tests
//   POST /hold       200, streams `<name> part 1` at once, then waits for `release()` and sends
//                    parts 2..5 and ends: a stream in flight for exactly as long as the test wants
//   anything else    200 {"replica": name, "path": url} once the body is in
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface TaggedReplica {
  name: string;
  port: number;
  /** Request paths received (the readiness path excluded), in arrival order. */
  requests: string[];
  /** Streams of /hold that have sent their first part and wait for `release()`. */
  holding(): number;
  /** Lets every stream held so far finish (later ones are held again). */
  release(): void;
  /** Connections open now (the gateways' pools keep them between requests). */
  openConnections(): number;
  /** Whether /health answers 200. */
  healthy: boolean;
  close(): Promise<void>;
}

/** The whole body a /hold stream of replica `name` sends. */
export function heldStreamBody(name: string): string {
  return [1, 2, 3, 4, 5].map((n) => `${name} part ${n}\n`).join('');
}

export async function startTaggedReplica(name: string): Promise<TaggedReplica> {
  const requests: string[] = [];
  const held: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  const finish = (res: ServerResponse): void => {
    for (const n of [2, 3, 4, 5]) res.write(`${name} part ${n}\n`);
    res.end();
  };
  const replica: TaggedReplica = {
    name,
    port: 0,
    requests,
    healthy: true,
    holding: () => held.length,
    openConnections: () => sockets.size,
    release: () => {
      for (const res of held.splice(0)) finish(res);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req, res) => {
    if (req.url === '/health') {
      res.writeHead(replica.healthy ? 200 : 503).end(replica.healthy ? 'ok' : 'not yet');
      return;
    }
    requests.push(req.url ?? '');
    req.resume();
    req.on('end', () => {
      if (req.url === '/hold') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write(`${name} part 1\n`);
        held.push(res);
        return;
      }
      const body = JSON.stringify({ replica: name, path: req.url });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  replica.port = (server.address() as AddressInfo).port;
  return replica;
}
