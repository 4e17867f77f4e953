// The request's side of an upstream connection: what the request going through it implements
// (the relay's per-request object, `UpstreamHandler`) and what it may do with the connection
// (`UpstreamExchange`). The pool's side, `ConnectionOwner`, is in connection.ts.
import type { RelayError } from '../http/errors.js';

/** What the request going through a connection may do with it (connection.ts: each method's rules). */
export interface UpstreamExchange {
  /** Writes the request head, and body bytes with it; false: wait for `onUpstreamWritable`. */
  send(head: string, expectBody: boolean, chunked: boolean, body: Buffer | undefined, last: boolean): boolean;
  /** `send` for a whole body valid only during the call; returns the body as a Buffer of its own. */
  sendWhole(head: string, expectBody: boolean, chunked: boolean, body: Uint8Array): Buffer;
  /** `send` for a whole body of `size` bytes in pieces, framed by the head's Content-Length. */
  sendPieces(head: string, expectBody: boolean, pieces: readonly Buffer[], size: number): boolean;
  /** One more piece of a streamed body. */
  writeBody(chunk: Buffer | undefined, last: boolean): boolean;
  /** The replica's stream flows again after `onUpstreamData` returned false. */
  resume(): void;
  /** Ends the exchange now: no more handler calls. */
  abort(): void;
}

/**
 * What a request needs to implement to go through a pool: the relay's per-request object, so
 * an exchange costs no closure. Call order: `onUpstreamConnection` once (or `onUpstreamError`);
 * then `onUpstreamField` for each field of the answer's head, `onUpstreamHead` at most once,
 * `onUpstreamData` any number of times, and exactly one of `onUpstreamEnd` / `onUpstreamError`.
 * Nothing after that, nor after `abort()`. Those that a read of the answer brings happen inside
 * that read's `onUpstreamRead`. `onUpstreamHeadRead` comes after `onUpstreamHead` (and the body
 * pieces of the same read), once, if the answer did not end in the read that completed its head.
 */
export interface UpstreamHandler {
  /** A connection is ready: write the request now (`send`, then `writeBody` for a streamed body). */
  onUpstreamConnection(connection: UpstreamExchange): void;
  /**
   * One field of the final head (1xx skipped), in arrival order, every one of them: name
   * `buf[nameStart..nameEnd)` as sent, value `buf[valueStart..valueEnd)` trimmed, valid only during
   * the call. What the caller gets of them is the request's decision; the connection reads the
   * framing fields itself. Fields may come for a head that is then refused (`onUpstreamError`).
   */
  onUpstreamField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void;
  /** The final status line and head (1xx skipped). `contentLength`, the body's framing, is -1 when absent. */
  onUpstreamHead(status: number, contentLength: number): void;
  /**
   * One read of the answer arrived: call `parse` now, once. Every other call of this interface
   * for the read's bytes (fields, head, data, end or error, `onUpstreamHeadRead`) happens during
   * it, so what they write to the caller can go out together. False pauses the replica's stream
   * until `resume()`, as from `onUpstreamData`.
   */
  onUpstreamRead(parse: () => void): boolean;
  /** The read that completed the head is over and the answer goes on: the head may go out now. */
  onUpstreamHeadRead(): void;
  /** A body piece, valid only during the call (copy it to keep it). False pauses the replica's stream until `resume()`. */
  onUpstreamData(chunk: Buffer): boolean;
  /** The answer is complete. */
  onUpstreamEnd(): void;
  /** The exchange failed (before or after the head); the connection is gone. */
  onUpstreamError(error: RelayError): void;
  /** The socket took a backlog of request body: send more. */
  onUpstreamWritable(): void;
}
