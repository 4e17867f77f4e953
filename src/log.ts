// The process logger: pino, JSON lines, fixed messages with the data in an object.
// Tokens never reach a log line: the relay never puts one in, and `redact` is the second lock
// (exact paths only: a wildcard path makes pino search every logged object).
import { pino, type Logger } from 'pino';

export type { Logger };

/** Log text is written in batches of this many bytes… */
const BATCH_BYTES = 4096;
/** …or at least this often, so a quiet gateway's lines are not held back. */
const FLUSH_EVERY_MS = 250;

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      name: 'sluice',
      redact: { paths: ['authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? batchedStdout(),
  );
}

/**
 * Standard output through sonic-boom, written asynchronously in batches: one write per 4 KiB of
 * log text instead of one per line, which at one access-log line per request is most of the cost
 * of logging. Callers flush before exiting (`logger.flush`).
 */
function batchedStdout(): pino.DestinationStream {
  const stream = pino.destination({ fd: 1, sync: false, minLength: BATCH_BYTES });
  const timer = setInterval(() => {
    if ((stream as unknown as { destroyed: boolean }).destroyed) clearInterval(timer);
    else stream.flush();
  }, FLUSH_EVERY_MS).unref();
  return stream;
}
