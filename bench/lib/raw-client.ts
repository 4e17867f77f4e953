// Raw-socket clients for what a pooled HTTP client hides: a reader slower than the stream it
// reads, and many streams held open doing nothing.
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Target } from './client.js';

function requestText(target: Target, method: string, path: string, body = ''): string {
  const headers = Object.entries(target.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const host = new URL(target.origin).host;
  return `${method} ${target.prefix}${path} HTTP/1.1\r\nhost: ${host}\r\n${headers}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function open(target: Target): Promise<Socket> {
  const url = new URL(target.origin);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

export interface SlowRead {
  /** Bytes received, headers included. */
  bytes: number;
  seconds: number;
}

/**
 * POSTs to `path` (an answer of at least `bytes` body bytes) and reads it at `bytesPerS`: the socket is
 * paused whenever the reader is ahead of that pace, so the relay has to hold back (or buffer) the
 * rest. Resolves when `bytes` have been read, then closes the connection.
 */
export async function slowRead(target: Target, path: string, bytes: number, bytesPerS: number, onTick?: () => void): Promise<SlowRead> {
  const socket = await open(target);
  const t0 = performance.now();
  const ticker = onTick === undefined ? undefined : setInterval(onTick, 100);
  try {
    return await new Promise<SlowRead>((resolve, reject) => {
      let received = 0;
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received >= bytes) {
          resolve({ bytes: received, seconds: (performance.now() - t0) / 1000 });
          return;
        }
        const aheadMs = (received / bytesPerS) * 1000 - (performance.now() - t0);
        if (aheadMs > 1) {
          socket.pause();
          setTimeout(() => socket.resume(), aheadMs);
        }
      });
      socket.once('error', reject);
      socket.once('end', () => reject(new Error(`slow reader: connection ended after ${received} of ${bytes} bytes`)));
      socket.write(requestText(target, 'POST', path, '{}'));
    });
  } finally {
    if (ticker !== undefined) clearInterval(ticker);
    socket.destroy();
  }
}

/**
 * Opens `count` streams (POST `path`, each on its own connection) and resolves once every one has
 * received its answer's first bytes past the headers; the caller closes them with the returned
 * function.
 */
export async function openIdleStreams(target: Target, path: string, count: number): Promise<() => void> {
  const sockets: Socket[] = [];
  const close = (): void => {
    for (const s of sockets) s.destroy();
  };
  try {
    const batch = 100;
    for (let i = 0; i < count; i += batch) {
      await Promise.all(
        Array.from({ length: Math.min(batch, count - i) }, async () => {
          const socket = await open(target);
          sockets.push(socket);
          await new Promise<void>((resolve, reject) => {
            let text = '';
            const onData = (chunk: Buffer): void => {
              text += chunk.toString('latin1');
              const head = text.indexOf('\r\n\r\n');
              if (!text.startsWith('HTTP/1.1 200')) {
                if (text.length > 12) reject(new Error(`idle stream: ${text.slice(0, 40)}`));
                return;
              }
              if (head >= 0 && text.includes(': open')) {
                socket.off('data', onData);
                socket.on('data', noop);
                resolve();
              }
            };
            socket.on('data', onData);
            socket.once('error', reject);
            socket.write(requestText(target, 'POST', path, '{}'));
          });
        }),
      );
    }
    await sleep(0);
    return close;
  } catch (err) {
    close();
    throw err;
  }
}

function noop(): void {}
