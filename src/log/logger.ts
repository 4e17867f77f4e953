// The process logger: pino, JSON lines, fixed messages with the data in an object.
// Tokens never reach a log line: the relay never puts one in, and `redact` is the second lock
// (exact paths only: a wildcard path makes pino search every logged object).
//
// Cost of one access-log line at info (bench/micro/access-log.ts, fastest round of 15×10k):
// about 6 µs through pino.destination with minLength alone, about 3 µs with the batching and
// the clock below. redact on these exact paths costs next to nothing, so it stays.
import { pino, type Logger } from 'pino';
import { LOG_FLUSH_EVERY_MS } from '../tunables.js';

/** Log text is written in batches of this many bytes… */
const LOG_BATCH_BYTES = 16 * 1024;

/** …gathered in a buffer this large (room for a batch and the line that completes it). */
const LOG_BATCH_CAPACITY = 32 * 1024;

/** sonic-boom's largest single write (its default, 16 KiB, must stay above minLength). */
const LOG_MAX_WRITE = 64 * 1024;

export type { Logger };

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      name: 'sluice',
      redact: { paths: ['authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
      timestamp: isoTime,
      serializers: { err: errField },
    },
    destination ?? batchedStdout(),
  );
}

/**
 * The `err` field: an Error as pino writes one (`type`, `message`, `stack`, its own fields), and
 * anything else as it is. pino's own serializer takes any object with a string `message` for an
 * error and rewrites it (`"type":"Object","stack":""`): the access line's `err` is already what
 * the line should say (`type`, `message`, `code`: describeUpstreamError).
 */
function errField(err: unknown): unknown {
  return err instanceof Error ? pino.stdSerializers.err(err) : err;
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

/** Bytes sonic-boom holds that are not written yet (its `_len`, missing from its typings). */
function pendingBytes(out: SonicBoom): number {
  return (out as unknown as { _len: number })._len;
}

/**
 * Standard output through sonic-boom, written asynchronously in batches: one write per 16 KiB of
 * log text instead of one per line, which at one access-log line per request is most of the cost
 * of logging. Callers flush before exiting (`logger.flush`).
 *
 * Each line is encoded into a batch buffer as it comes and sonic-boom gets whole buffers
 * (`contentMode: 'buffer'`). Appending lines to one string was cheap, but the write then encoded a
 * rope of thousands of pieces: measured in the gateway under load, 225 to 300 µs per 16 KiB
 * batch, about 4 µs per request at `info`; a line encoded as it comes costs a fraction of that.
 * (sonic-boom's own string `write` also measures the UTF-8 length of its whole pending text on
 * every call.)
 */
function batchedStdout(): pino.DestinationStream {
  const out = pino.destination({ fd: 1, sync: false, minLength: LOG_BATCH_BYTES, maxWrite: LOG_MAX_WRITE, contentMode: 'buffer' });
  const batcher = new LineBatcher(out);
  const timer = setInterval(() => {
    if (destroyed(out)) clearInterval(timer);
    else batcher.flushPending();
  }, LOG_FLUSH_EVERY_MS).unref();
  // Before pino's own exit handler (registered when `out` was made) flushes sonic-boom.
  const handOver = (): void => batcher.handOver();
  process.prependListener('beforeExit', handOver);
  process.prependListener('exit', handOver);
  return batcher;
}

/** Gathers lines, encoded, and passes them to sonic-boom in batches; `flush` passes what is left. */
class LineBatcher implements pino.DestinationStream {
  private batch = Buffer.allocUnsafe(LOG_BATCH_CAPACITY);
  private used = 0;

  constructor(private readonly out: SonicBoom) {}

  write(line: string): void {
    // At most 3 UTF-8 bytes per UTF-16 unit: a line that might not fit goes after a hand-over.
    if (this.used + line.length * 3 > LOG_BATCH_CAPACITY) {
      this.handOver();
      if (line.length * 3 > LOG_BATCH_CAPACITY) {
        this.pass(Buffer.from(line, 'utf8'));
        return;
      }
    }
    this.used += this.batch.write(line, this.used, 'utf8');
    if (this.used >= LOG_BATCH_BYTES) this.handOver();
  }

  /** What pino's `logger.flush(cb)` calls: everything gathered, then sonic-boom's flush. */
  flush(cb?: (err?: Error) => void): void {
    this.handOver();
    if (destroyed(this.out)) cb?.();
    else this.out.flush(cb);
  }

  /**
   * The clock's flush: only when there is something to write. sonic-boom's flush with nothing
   * pending still makes an empty write (a round trip through libuv's thread pool and a wake-up of
   * the event loop), four times a second on a quiet gateway.
   */
  flushPending(): void {
    if (this.used > 0 || pendingBytes(this.out) > 0) this.flush();
  }

  handOver(): void {
    if (this.used === 0) return;
    // sonic-boom keeps the buffer until it is written: the next batch gets a new one.
    const full = this.batch.subarray(0, this.used);
    this.batch = Buffer.allocUnsafe(LOG_BATCH_CAPACITY);
    this.used = 0;
    this.pass(full);
  }

  private pass(bytes: Buffer): void {
    // sonic-boom's typings know strings only; in buffer content mode it takes Buffers.
    if (!destroyed(this.out)) this.out.write(bytes as unknown as string);
  }
}
