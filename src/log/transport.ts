// Log lines of worker threads reach the process's one log destination through the main thread,
// so lines from several threads never interleave or tear (a pipe write over 4 KiB is not atomic)
// and a test's captured logger sees every thread. A worker's pino writes into a buffer that is
// posted as one message per 4 KiB or per turn of its event loop, whichever comes first: under
// load one message carries many lines; a quiet worker's line leaves at once.
import { pino, type Logger } from 'pino';

/** A worker posts its log lines to the main thread per this many bytes, or per turn of its loop. */
const WORKER_LOG_BATCH_BYTES = 4096;

/** A pino destination that posts batches of whole lines with `post`. */
export class PostingDestination {
  private buffer = '';
  private scheduled = false;
  private readonly flushSoon = (): void => {
    this.scheduled = false;
    this.flush();
  };

  constructor(private readonly post: (text: string) => void) {}

  write(line: string): boolean {
    this.buffer += line;
    if (this.buffer.length >= WORKER_LOG_BATCH_BYTES) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushSoon);
    }
    return true;
  }

  flush(): void {
    if (this.buffer === '') return;
    const text = this.buffer;
    this.buffer = '';
    this.post(text);
  }
}

/** Where a logger writes: the main thread writes the workers' batches there too. */
export function destinationOf(logger: Logger): { write(text: string): unknown } {
  return (logger as unknown as Record<symbol, { write(text: string): unknown }>)[pino.symbols.streamSym]!;
}
