// The request written to a replica's socket (connection.ts `send`, `sendWhole`, `sendPieces`,
// `writeBody`): head and body in one write where they fit (JOIN_LIMIT), else one corked write, and
// a body's chunked framing — the size line before a chunk's bytes, the CRLF (and the last chunk)
// after them (docs/architecture.md#fact-12). The connection keeps the exchange's state and
// deadlines; these only write.
import type { Socket } from 'node:net';
import { JOIN_LIMIT } from '../tunables.js';

/** Chunked framing of a request body sent with its head: the first chunk's size line, or the end. */
function chunkPrefix(size: number, last: boolean): string {
  return size > 0 ? `${size.toString(16)}\r\n` : last ? '0\r\n\r\n' : '';
}

/** Chunked framing after the first chunk's bytes. */
function chunkSuffix(size: number, last: boolean): string {
  return size === 0 ? '' : last ? '\r\n0\r\n\r\n' : '\r\n';
}

/** One buffer: `prefix` (latin1), `body`, `suffix` (latin1). */
function joined(prefix: string, body: Uint8Array, suffix: string): Buffer {
  const size = body.length;
  const out = Buffer.allocUnsafe(prefix.length + size + suffix.length);
  out.write(prefix, 0, 'latin1');
  out.set(body, prefix.length);
  if (suffix !== '') out.write(suffix, prefix.length + size, 'latin1');
  return out;
}

/** Writes the head and, if given, body bytes with it (`last`: the body ends with them). False: the socket's buffer is full. */
export function writeHead(socket: Socket, head: string, chunked: boolean, body: Buffer | undefined, last: boolean): boolean {
  const size = body === undefined ? 0 : body.length;
  const prefix = chunked ? head + chunkPrefix(size, last) : head;
  const suffix = chunked ? chunkSuffix(size, last) : '';
  if (size === 0) return socket.write(prefix, 'latin1');
  if (size <= JOIN_LIMIT) return socket.write(joined(prefix, body!, suffix));
  socket.cork();
  socket.write(prefix, 'latin1');
  let ok = socket.write(body!);
  if (suffix !== '') ok = socket.write(suffix, 'latin1');
  socket.uncork();
  return ok;
}

/**
 * Writes the head with a whole body of 1..JOIN_LIMIT bytes that is valid only during the call, in
 * one buffer; returns the body's bytes in it (a view, kept for a retry: the body is copied once).
 */
export function writeHeadJoined(socket: Socket, head: string, chunked: boolean, body: Uint8Array): Buffer {
  const size = body.length;
  const prefix = chunked ? head + chunkPrefix(size, true) : head;
  const out = joined(prefix, body, chunked ? chunkSuffix(size, true) : '');
  socket.write(out);
  return out.subarray(prefix.length, prefix.length + size);
}

/** Writes the head with a whole body of `size` bytes in two or more pieces (framed by the head's Content-Length). */
export function writeHeadPieces(socket: Socket, head: string, pieces: readonly Buffer[], size: number): boolean {
  if (size <= JOIN_LIMIT) {
    const out = Buffer.allocUnsafe(head.length + size);
    let at = out.write(head, 0, 'latin1');
    for (const piece of pieces) at += piece.copy(out, at);
    return socket.write(out);
  }
  socket.cork();
  let ok = socket.write(head, 'latin1');
  for (const piece of pieces) ok = socket.write(piece);
  socket.uncork();
  return ok;
}

/** Writes one more piece of a streamed body (`chunk` may be undefined with `last`). */
export function writeBodyPiece(socket: Socket, chunked: boolean, chunk: Buffer | undefined, last: boolean): boolean {
  const size = chunk === undefined ? 0 : chunk.length;
  if (!chunked) return size > 0 ? socket.write(chunk!) : true;
  if (size > 0) {
    socket.cork();
    socket.write(`${size.toString(16)}\r\n`, 'latin1');
    socket.write(chunk!);
    const ok = socket.write(last ? '\r\n0\r\n\r\n' : '\r\n', 'latin1');
    socket.uncork();
    return ok;
  }
  return last ? socket.write('0\r\n\r\n', 'latin1') : true;
}
