// A POST whose head and body reach the gateway in separate packets, as Python's `requests` sends
// them (docs/architecture.md#fact-21): a raw socket, the head in one write, each part of the body in
// its own write `gapMs` later (a scripted pace). The answer is read until it is complete
// (Content-Length or chunked framing) or the connection closes.
import { connect } from 'node:net';
import { sleep } from './wait.js';

export interface SplitAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/**
 * POSTs `parts` (the body, each part its own write) to `path` on `port` with `headers` (names in
 * lower case; `content-length` is added unless `transfer-encoding` is given: then each part is
 * sent as a chunk, and the last chunk after them).
 */
export function splitPost(port: number, path: string, headers: Record<string, string>, parts: (string | Buffer)[], gapMs = 30): Promise<SplitAnswer> {
  const chunked = headers['transfer-encoding'] === 'chunked';
  const buffers = parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p));
  const length = buffers.reduce((n, b) => n + b.length, 0);
  const lines = [`POST ${path} HTTP/1.1`, 'host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (!chunked) lines.push(`content-length: ${length}`);
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (): void => {
      const answer = complete(received);
      if (answer === undefined || done) return;
      done = true;
      socket.destroy();
      resolve(answer);
    };
    socket.on('connect', async () => {
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      for (const b of buffers) {
        await sleep(gapMs);
        if (socket.destroyed) return;
        socket.write(chunked ? Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]) : b);
      }
      if (chunked && !socket.destroyed) socket.write('0\r\n\r\n');
    });
    socket.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      finish();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (done) return;
      done = true;
      const answer = complete(received, true);
      if (answer === undefined) reject(new Error(`the connection closed without a complete answer: ${JSON.stringify(received.toString('latin1').slice(0, 200))}`));
      else resolve(answer);
    });
  });
}

/** The answer in `bytes` once it is complete (or, `closed`, whatever of it came), else undefined. */
function complete(bytes: Buffer, closed = false): SplitAnswer | undefined {
  const text = bytes.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine!)?.[1]);
  const rest = bytes.subarray(headEnd + 4);
  const length = headers.get('content-length');
  if (length !== undefined) {
    if (rest.length < Number(length) && !closed) return undefined;
    return { status, headers, body: rest.subarray(0, Number(length)).toString() };
  }
  if (headers.get('transfer-encoding') === 'chunked') {
    if (!rest.toString('latin1').includes('\r\n0\r\n\r\n') && !rest.toString('latin1').startsWith('0\r\n\r\n') && !closed) return undefined;
    return { status, headers, body: dechunk(rest) };
  }
  return closed ? { status, headers, body: rest.toString() } : undefined;
}

function dechunk(b: Buffer): string {
  let out = '';
  let at = 0;
  const text = b.toString('latin1');
  for (;;) {
    const eol = text.indexOf('\r\n', at);
    if (eol < 0) return out;
    const size = parseInt(text.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += b.subarray(eol + 2, eol + 2 + size).toString();
    at = eol + 2 + size + 2;
  }
}
