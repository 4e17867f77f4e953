// A replica whose streamed answer the test scripts in the request body: the status, the content
// type, pieces written one by one (each after its delay, on a socket without Nagle, so pieces
// reach the gateway in reads of their own), and how the answer ends.
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { readBody, startReplica, type TestReplica } from './replica.js';

export interface StreamScript {
  status?: number;
  /** Default text/event-stream. */
  contentType?: string;
  /** `[delayMs, text]`: wait, then write the text. */
  pieces: [number, string][];
  /** `end` (default): a clean end; `reset`: the connection is reset; `hang`: nothing more is sent. */
  end?: 'end' | 'reset' | 'hang';
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The replica. Every request's body is its script. */
export async function startSseReplica(): Promise<TestReplica> {
  return startReplica(async (req: IncomingMessage, res: ServerResponse) => {
    const script = JSON.parse((await readBody(req)).toString()) as StreamScript;
    req.socket.setNoDelay(true);
    res.writeHead(script.status ?? 200, { 'content-type': script.contentType ?? 'text/event-stream' });
    res.flushHeaders();
    for (const [delayMs, text] of script.pieces) {
      if (delayMs > 0) await sleep(delayMs);
      if (res.destroyed) return;
      res.write(text);
    }
    const end = script.end ?? 'end';
    if (end === 'end') res.end();
    else if (end === 'reset') {
      // After the gateway has read what was written: a reset drops what the receiver has not read yet.
      await sleep(50);
      res.socket?.resetAndDestroy();
    }
  });
}
