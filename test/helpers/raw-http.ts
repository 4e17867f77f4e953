// Raw HTTP/1.1 on node:net for the hostile-caller tests: write bytes exactly as given, read
// whatever comes back until the gateway closes the connection (or a guard against hanging fires).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { sleep } from './wait.js';

export interface RawExchange {
  /** Everything the gateway sent before the connection closed (or before the guard fired). */
  bytes: Buffer;
  /** The gateway closed the connection (false: the guard fired and the test closed it). */
  closedByGateway: boolean;
  /** The socket error that ended the connection, if it was reset rather than closed. */
  error: string | undefined;
}

/**
 * Writes `data` in one write (or each element of an array as its own write, `gapMs` apart) and
 * collects the answer until the gateway closes the connection or `guardMs` passes.
 */
export function rawExchange(
  port: number,
  data: string | Buffer | (string | Buffer)[],
  guardMs = 5_000,
  gapMs = 20,
  localAddress?: string,
): Promise<RawExchange> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let closedByGateway = true;
    const socket = connect({ port, host: '127.0.0.1', ...(localAddress === undefined ? {} : { localAddress }) });
    const guard = setTimeout(() => {
      closedByGateway = false;
      socket.destroy();
    }, guardMs);
    socket.on('connect', async () => {
      const parts = Array.isArray(data) ? data : [data];
      for (const [i, part] of parts.entries()) {
        if (socket.destroyed) return;
        if (i > 0) await sleep(gapMs);
        socket.write(typeof part === 'string' ? Buffer.from(part, 'latin1') : part);
      }
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.on('close', () => {
      clearTimeout(guard);
      resolve({ bytes: Buffer.concat(chunks), closedByGateway, error });
    });
  });
}

export interface RawResponse {
  status: number;
  headers: Map<string, string[]>;
  body: Buffer;
  /** Bytes after the first response (a second response would be here). */
  rest: Buffer;
}

/** Parses one HTTP/1.1 response (Content-Length framed, as all of Sluice's errors are). */
export function parseResponse(bytes: Buffer): RawResponse {
  const text = bytes.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  assert.ok(headEnd > 0, `a complete response head in ${JSON.stringify(text)}`);
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
  const match = /^HTTP\/1\.1 (\d{3})(?: .*)?$/.exec(statusLine!);
  assert.ok(match, `a status line: ${JSON.stringify(statusLine)}`);
  const headers = new Map<string, string[]>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  const length = Number(headers.get('content-length')?.[0] ?? '0');
  const bodyStart = headEnd + 4;
  return { status: Number(match[1]), headers, body: bytes.subarray(bodyStart, bodyStart + length), rest: bytes.subarray(bodyStart + length) };
}

/** The first status line in `bytes`, or a description of a silent close. */
export function firstLine(exchange: RawExchange): string {
  const line = exchange.bytes.toString('latin1').split('\r\n')[0];
  return line !== undefined && line !== '' ? line : `closed without an answer (${exchange.error ?? 'FIN'})`;
}

/** Asserts a response is Sluice's own error with `code`: JSON body and `X-Sluice-Error`. */
export function assertSluiceError(response: RawResponse, status: number, code: string): void {
  assert.equal(response.status, status);
  assert.deepEqual(response.headers.get('x-sluice-error'), [code]);
  const body = JSON.parse(response.body.toString('utf8')) as { error: { code: string } };
  assert.equal(body.error.code, code);
  assert.doesNotMatch(response.rest.toString('latin1'), /HTTP\/1\.1/, 'a single answer');
}
