// The two sides an upstream connection talks to: the request going through it (the relay's
// per-request object, `UpstreamHandler`) and the pool that owns it (`ConnectionOwner`).
import type { RelayError } from '../http/errors.js';
import type { UpstreamConnection } from './connection.js';

/**
 * What a request needs to implement to go through a pool: the relay's per-request object, so
 * an exchange costs no closure. Call order: `onUpstreamConnection` once (or `onUpstreamError`);
 * then `onUpstreamField` for each field of the answer's head, `onUpstreamHead` at most once, `onUpstreamData` any number of times, and exactly one of
 * `onUpstreamEnd` / `onUpstreamError`. Nothing after that, nor after `abort()`. `onUpstreamHeadRead`
 * comes after `onUpstreamHead` (and the body pieces of the same read), once, if the answer did not
 * end in the read that completed its head.
 */
export interface UpstreamHandler {
  /** A connection is ready: write the request now (`send`, then `writeBody` for a streamed body). */
  onUpstreamConnection(connection: UpstreamConnection): void;
  /**
   * One field of the final head (1xx skipped), in arrival order, every one of them: name
   * `buf[nameStart..nameEnd)` as sent, value `buf[valueStart..valueEnd)` trimmed, valid only during
   * the call. What the caller gets of them is the request's decision; the connection reads the
   * framing fields itself. Fields may come for a head that is then refused (`onUpstreamError`).
   */
  onUpstreamField(buf: Buffer, nameStart: number, nameEnd: number, valueStart: number, valueEnd: number): void;
  /** The final status line and head (1xx skipped). `contentLength`, the body's framing, is -1 when absent. */
  onUpstreamHead(status: number, contentLength: number): void;
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

/** The pool's side of a connection. */
export interface ConnectionOwner {
  readonly connectMs: number;
  readonly headersMs: number;
  readonly bodyIdleMs: number;
  /** Ticks after which a request still waiting for its status line is overdue (0: not counted). */
  readonly overdueTicks: number;
  /** `delta` more (or fewer) of its requests are overdue for their status line. */
  overdue(delta: number): void;
  /** A complete exchange left the connection reusable. */
  released(connection: UpstreamConnection): void;
  /** The connection is closed (called once). */
  closed(connection: UpstreamConnection): void;
}
