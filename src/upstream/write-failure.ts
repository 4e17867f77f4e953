// A failed write to a replica's socket must not close it (docs/architecture.md#fact-22). Node
// destroys a socket whose write fails (EPIPE, ECONNRESET), and with it whatever the kernel still
// holds to be read: a replica that answered before reading the request's body and closed its
// connection (a WSGI server reading CONTENT_LENGTH bytes of a chunked body, which is none) has its
// answer in this socket's receive buffer when the next body piece fails to go, and the caller
// would get a 502 instead of it. So the socket's write callback is taken over: a write that failed
// is reported to the connection and handed back to the stream as done, and the socket stays open
// and reading; the connection writes nothing more and waits for the answer, the end of the
// connection or its deadline.
import type { Socket } from 'node:net';

type WriteCallback = (error?: Error | null) => void;
type Write = (chunk: unknown, encoding: BufferEncoding, callback: WriteCallback) => void;
type Writev = (chunks: { chunk: unknown; encoding: BufferEncoding }[], callback: WriteCallback) => void;

/** Is told when a write to its socket failed (once per failed write). */
export interface WriteFailureSink {
  onWriteFailed(): void;
}

/**
 * Reports `socket`'s failed writes to `sink` instead of destroying the socket. Costs three
 * closures per socket, none per write: the stream has one write in progress at a time, so the
 * callback of the write in progress is a field.
 */
export function reportWriteFailures(socket: Socket, sink: WriteFailureSink): void {
  const write = socket._write as Write;
  const writev = socket._writev as Writev | undefined;
  let callback: WriteCallback | undefined;
  const done: WriteCallback = (error) => {
    const next = callback!;
    callback = undefined;
    if (error) sink.onWriteFailed();
    next();
  };
  socket._write = (chunk: unknown, encoding: BufferEncoding, cb: WriteCallback): void => {
    callback = cb;
    write.call(socket, chunk, encoding, done);
  };
  if (writev !== undefined) {
    socket._writev = (chunks: { chunk: unknown; encoding: BufferEncoding }[], cb: WriteCallback): void => {
      callback = cb;
      writev.call(socket, chunks, done);
    };
  }
}
