// A replica whose answer the test scripts in the request body: when and whether the head is sent,
// the status and content type, pieces written one by one (each after its delay, on a socket
// without Nagle, so pieces reach the gateway in reads of their own), and how the answer ends.
// Other fields of the body (`"stream": true`, …) are the request's own.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody, startReplica, type TestReplica } from './replica.js';
import { sleep } from './wait.js';

export interface StreamScript {
  /** Wait this long before the head. */
  headDelayMs?: number;
  /** `send` (default); `hang`: never answer; `reset`: reset the connection instead of answering. */
  head?: 'send' | 'hang' | 'reset';
  status?: number;
  /** Default text/event-stream. */
  contentType?: string;
  /** Send Content-Length (the pieces' total) instead of chunked framing. */
  withLength?: boolean;
  /** `[delayMs, text]`: wait, then write the text. */
  pieces: [number, string][];
  /**
   * Each piece after the first waits for the test's `release()` (the n-th piece for the n-th
   * release, counted over the replica's life) before its delay: paced by what the caller has
   * read, so that a busy machine cannot make two pieces arrive closer than their delay.
   */
  gated?: boolean;
  /** `end` (default): a clean end; `reset`: the connection is reset once the test calls `allowResets()`; `hang`: nothing more is sent. */
  end?: 'end' | 'reset' | 'hang';
}

export interface SseReplica extends TestReplica {
  /** Requests whose connection closed before the replica ended its answer. */
  abandoned: number;
  /**
   * Lets `end: 'reset'` answers reset (those waiting and any later). Call it once the caller has
   * seen what was written: a reset drops what the receiver has not read yet.
   */
  allowResets(): void;
  /** Lets the next piece of `gated` answers go (see StreamScript.gated). */
  release(): void;
}


/** The replica. Every request's body is its script. */
export async function startSseReplica(): Promise<SseReplica> {
  let allowResets!: () => void;
  const resetsAllowed = new Promise<void>((resolve) => (allowResets = resolve));
  let released = 0;
  const gates: { n: number; open: () => void }[] = [];
  const gate = (n: number): Promise<void> => (released >= n ? Promise.resolve() : new Promise<void>((open) => gates.push({ n, open })));
  const release = (): void => {
    released++;
    for (const g of gates.filter((w) => w.n <= released)) {
      gates.splice(gates.indexOf(g), 1);
      g.open();
    }
  };
  const replica = (await startReplica(async (req: IncomingMessage, res: ServerResponse) => {
    const script = JSON.parse((await readBody(req)).toString()) as StreamScript;
    req.socket.setNoDelay(true);
    res.on('close', () => {
      if (!res.writableFinished) replica.abandoned++;
    });
    if (script.headDelayMs !== undefined) await sleep(script.headDelayMs);
    if (script.head === 'hang') return;
    if (script.head === 'reset') {
      res.socket?.resetAndDestroy();
      return;
    }
    const headers: Record<string, string | number> = { 'content-type': script.contentType ?? 'text/event-stream' };
    if (script.withLength) headers['content-length'] = script.pieces.reduce((n, [, text]) => n + Buffer.byteLength(text), 0);
    res.writeHead(script.status ?? 200, headers);
    res.flushHeaders();
    for (const [i, [delayMs, text]] of script.pieces.entries()) {
      if (script.gated === true && i > 0) await gate(i);
      if (delayMs > 0) await sleep(delayMs);
      if (res.destroyed) return;
      res.write(text);
    }
    const end = script.end ?? 'end';
    if (end === 'end') res.end();
    else if (end === 'reset') {
      await resetsAllowed;
      res.socket?.resetAndDestroy();
    }
  })) as SseReplica;
  replica.abandoned = 0;
  replica.allowResets = allowResets;
  replica.release = release;
  return replica;
}
