// `node dist/bench/micro/access-log.js > /dev/null` (or `> /tmp/lines`): µs per access-log line.
// Times `logger.info(line, 'request')` as `createLogger` (src/log/logger.ts) configures it, building the
// line the way the gateway does, next to variants that show where the time goes. Timings go to
// stderr; stdout is the log destination being measured (point it at /dev/null or a file).
import { pino } from 'pino';
import { createLogger } from '../../src/log/logger.js';
import { report, time } from './timing.js';

const N = Number(process.env['MICRO_N'] ?? 10_000);

/** The destination createLogger uses: stdout through sonic-boom, written in 4 KiB batches. */
function batched(): pino.DestinationStream {
  return pino.destination({ fd: 1, sync: false, minLength: 4096 });
}

const base = { name: 'sluice', timestamp: pino.stdTimeFunctions.isoTime };
// `withRedact` is createLogger as it was before the LineBatcher and the cached clock.
const redact = { paths: ['authorization', 'headers.authorization', 'token'], censor: '[redacted]' };

/** The line as the gateway built it first: optional fields present as `undefined`. */
function lineWithUndefined(i: number): object {
  const ttfb = 0.4 + (i & 7) / 100;
  return {
    reqId: `3f9a1c2b7d4e-${i.toString(36)}`,
    service: 'bench',
    tokenName: 'bench',
    method: 'POST',
    path: '/v1/infer',
    status: 200,
    outcome: 'ok',
    bytesIn: 70,
    bytesOut: 106,
    ttfbMs: ttfb >= 0 ? Math.round(ttfb * 1000) / 1000 : undefined,
    ms: Math.round((ttfb + 0.05) * 1000) / 1000,
    queuedMs: undefined,
    retried: undefined,
    err: undefined,
  };
}

/** The same line with only the fields that have a value. */
function lineWithoutUndefined(i: number): object {
  const ttfb = 0.4 + (i & 7) / 100;
  return {
    reqId: `3f9a1c2b7d4e-${i.toString(36)}`,
    service: 'bench',
    tokenName: 'bench',
    method: 'POST',
    path: '/v1/infer',
    status: 200,
    outcome: 'ok',
    bytesIn: 70,
    bytesOut: 106,
    ttfbMs: Math.round(ttfb * 1000) / 1000,
    ms: Math.round((ttfb + 0.05) * 1000) / 1000,
  };
}

const variant = process.argv[2];
const gateway = createLogger('info');
const withRedact = pino({ ...base, level: 'info', redact }, batched());
const withoutRedact = pino({ ...base, level: 'info' }, batched());
const epochTime = pino({ name: 'sluice', level: 'info' }, batched());
const silent = createLogger('warn');
class Front {
  pending = '';
  constructor(readonly out: pino.DestinationStream) {}
  write(line: string): void {
    this.pending += line;
    if (this.pending.length >= 4096) {
      const text = this.pending;
      this.pending = '';
      this.out.write(text);
    }
  }
}
const fronted = pino({ ...base, level: 'info' }, new Front(batched()));
const nowhere = pino({ ...base, level: 'info' }, { write(): void {} });
const nowhereEpoch = pino({ name: 'sluice', level: 'info' }, { write(): void {} });

const all = {
  'createLogger (src/log/logger.ts), line with undefined keys': () => time('createLogger, undefined keys', N, (i) => gateway.info(lineWithUndefined(i), 'request')),
  'createLogger (src/log/logger.ts), line without undefined keys': () => time('createLogger, no undefined keys', N, (i) => gateway.info(lineWithoutUndefined(i), 'request')),
  'redact, undefined keys': () => time('pino + redact, undefined keys', N, (i) => withRedact.info(lineWithUndefined(i), 'request')),
  'redact, no undefined keys': () => time('pino + redact, no undefined keys', N, (i) => withRedact.info(lineWithoutUndefined(i), 'request')),
  'no redact, undefined keys': () => time('pino no redact, undefined keys', N, (i) => withoutRedact.info(lineWithUndefined(i), 'request')),
  'no redact, no undefined keys': () => time('pino no redact, no undefined keys', N, (i) => withoutRedact.info(lineWithoutUndefined(i), 'request')),
  'epoch time, no redact, no undefined': () => time('epoch time (not isoTime), no redact', N, (i) => epochTime.info(lineWithoutUndefined(i), 'request')),
  'front batch': () => time('pino no redact, 4 KiB front batch', N, (i) => fronted.info(lineWithoutUndefined(i), 'request')),
  'null destination': () => time('pino no redact, null destination', N, (i) => nowhere.info(lineWithoutUndefined(i), 'request')),
  'null destination epoch': () => time('pino epoch time, null destination', N, (i) => nowhereEpoch.info(lineWithoutUndefined(i), 'request')),
  'JSON.stringify': () => time('JSON.stringify(line) alone', N, (i) => JSON.stringify(lineWithoutUndefined(i))),
  'level off (warn): building the line only': () => time('level warn: line built, not written', N, (i) => silent.info(lineWithUndefined(i), 'request')),
};

const timings = [];
for (const [key, run] of Object.entries(all)) if (variant === undefined || key.includes(variant)) timings.push(await run());
report(timings);
gateway.flush();
