// The process logger: pino, JSON lines, fixed messages with the data in an object.
// Tokens never reach a log line: the relay never puts one in, and `redact` is the second lock.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      name: 'sluice',
      redact: { paths: ['authorization', '*.authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ fd: 1, sync: false }),
  );
}
