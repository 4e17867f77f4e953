// A scriptable replica for black-box tests: a real node:http server on port 0 that records what
// it received and answers with the test's handler.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
}

export interface TestReplica {
  url: string;
  port: number;
  /** Requests as they arrived (before their bodies were read). */
  seen: SeenRequest[];
  server: Server;
  close(): Promise<void>;
}

export type ReplicaHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export async function startReplica(handler: ReplicaHandler): Promise<TestReplica> {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders });
    Promise.resolve(handler(req, res)).catch((err: unknown) => {
      res.destroy(err as Error);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Reads a whole request body. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Reads a request body, returning its size and SHA-256 without keeping it. */
export async function digestBody(req: IncomingMessage): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of req) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** A port with nothing listening on it (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A replica that holds every request to `/hold` in `held` (answered when the test ends it) and
 * answers any other with `answer` as JSON: what the limits tests need to keep a place taken.
 */
export function startHoldingReplica(held: ServerResponse[], answer: unknown = {}): Promise<TestReplica> {
  const body = JSON.stringify(answer);
  return startReplica(async (req, res) => {
    await readBody(req);
    if (req.url === '/hold') {
      held.push(res);
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(body);
  });
}
