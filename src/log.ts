// The process logger: pino, JSON lines, fixed messages with the data in an object.
// Tokens never reach a log line: the relay never puts one in, and `redact` is the second lock
// (exact paths only: a wildcard path makes pino search every logged object).
//
// Cost of one access-log line at info (bench/micro/access-log.ts, fastest round of 15×10k):
// about 6 µs through pino.destination with minLength alone, about 3 µs with the batching and
// the clock below. redact on these exact paths costs next to nothing, so it stays.
import { pino, type Logger } from 'pino';

export type { Logger };

/** Log text is written in batches of this many bytes… */
const BATCH_BYTES = 16 * 1024;
/** sonic-boom's largest single write (its default, 16 KiB, must stay above minLength). */
const MAX_WRITE = 64 * 1024;
/** …or at least this often, so a quiet gateway's lines are not held back. */
const FLUSH_EVERY_MS = 250;

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      name: 'sluice',
      redact: { paths: ['authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
      timestamp: isoTime,
    },
    destination ?? batchedStdout(),
  );
}

/**
 * pino's `isoTime` (`,"time":"2026-01-02T03:04:05.678Z"`) without a `Date` and `toISOString`
 * per line: the text up to the second is kept and only the milliseconds are appended.
 */
let clockSecond = -1;
let clockHead = '';
function isoTime(): string {
  const now = Date.now();
  const ms = now % 1000;
  const second = now - ms;
  if (second !== clockSecond) {
    clockSecond = second;
    clockHead = `,"time":"${new Date(second).toISOString().slice(0, 20)}`;
  }
  return `${clockHead}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}

type SonicBoom = ReturnType<typeof pino.destination>;

/** sonic-boom's `destroyed` flag, missing from its typings. */
function destroyed(out: SonicBoom): boolean {
  return (out as unknown as { destroyed: boolean }).destroyed;
}

/**
 * Standard output through sonic-boom, written asynchronously in batches: one write per 16 KiB of
 * log text instead of one per line, which at one access-log line per request is most of the cost
 * of logging. Callers flush before exiting (`logger.flush`).
 *
 * Lines are gathered here and handed to sonic-boom 16 KiB at a time: sonic-boom's own `write`
 * measures the UTF-8 length of its whole pending text on every call (`Buffer.byteLength`),
 * which cost about 3 µs per line; appending to a string costs next to nothing.
 */
function batchedStdout(): pino.DestinationStream {
  const out = pino.destination({ fd: 1, sync: false, minLength: BATCH_BYTES, maxWrite: MAX_WRITE });
  const batcher = new LineBatcher(out);
  const timer = setInterval(() => {
    if (destroyed(out)) clearInterval(timer);
    else batcher.flush();
  }, FLUSH_EVERY_MS).unref();
  // Before pino's own exit handler (registered when `out` was made) flushes sonic-boom.
  const handOver = (): void => batcher.handOver();
  process.prependListener('beforeExit', handOver);
  process.prependListener('exit', handOver);
  return batcher;
}

/** Gathers lines and passes them to sonic-boom in batches; `flush` passes what is left. */
class LineBatcher implements pino.DestinationStream {
  private pending = '';

  constructor(private readonly out: SonicBoom) {}

  write(line: string): void {
    this.pending += line;
    // UTF-16 units, not bytes: close enough for a batch size.
    if (this.pending.length >= BATCH_BYTES) this.handOver();
  }

  /** What pino's `logger.flush(cb)` calls: everything gathered, then sonic-boom's flush. */
  flush(cb?: (err?: Error) => void): void {
    this.handOver();
    if (destroyed(this.out)) cb?.();
    else this.out.flush(cb);
  }

  handOver(): void {
    if (this.pending === '' || destroyed(this.out)) return;
    const text = this.pending;
    this.pending = '';
    this.out.write(text);
  }
}
