// The access-log line built without pino's generic loop (src/log/access-log.ts) is the line pino
// writes for `logger.info(line, 'request')`, byte for byte apart from the clock reading: awkward
// strings (quotes, backslashes, control characters, non-ASCII, long paths), optional fields left
// out, both levels, the level filter, and the fallbacks through pino itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { type AccessLine, AccessLog, millis } from '../../src/log/access-log.js';
import { createLogger } from '../../src/log/logger.js';

class Capture {
  lines: string[] = [];
  write(s: string): void {
    this.lines.push(s);
  }
}

const TIME = /,"time":("[^"]*"|\d+)/;

function line(over: Partial<AccessLine> = {}): AccessLine {
  return {
    reqId: '3f9a1c2b7d4e-1a',
    service: 'chat',
    tokenName: 'ci',
    method: 'POST',
    path: '/v1/infer',
    status: 200,
    outcome: 'ok',
    bytesIn: 70,
    bytesOut: 1024,
    heldBytes: undefined,
    ttfbMs: 0.412,
    ms: 0.5,
    queuedMs: undefined,
    retried: undefined,
    keptAlive: undefined,
    events: undefined,
    firstEventMs: undefined,
    maxGapMs: undefined,
    promptTokens: undefined,
    completionTokens: undefined,
    err: undefined,
    ...over,
  };
}

/** The line from AccessLog and from pino, with the time taken out of both. */
function both(logger: pino.Logger, out: Capture, l: AccessLine, failed: boolean): [string | undefined, string | undefined] {
  out.lines = [];
  new AccessLog(logger).write(l, failed);
  const ours = out.lines[0];
  out.lines = [];
  if (failed) logger.warn(l, 'request');
  else logger.info(l, 'request');
  const theirs = out.lines[0];
  return [ours?.replace(TIME, ''), theirs?.replace(TIME, '')];
}

const CASES: [string, Partial<AccessLine>][] = [
  ['plain', {}],
  ['quotes and backslashes in the path', { path: '/v1/a"b\\c"' }],
  ['a control character', { path: '/v1/a\tb', tokenName: 'tab\u0001' }],
  ['non-ASCII', { path: '/v1/caf\u00e9/\u2603', tokenName: 'n\u00e4me' }],
  ['a long path with a quote', { path: `/v1/${'x'.repeat(150)}"` }],
  ['every optional field', { heldBytes: 39, ttfbMs: 12.25, queuedMs: 300.125, retried: true, keptAlive: true, events: 42, firstEventMs: 812.5, maxGapMs: 61.003, promptTokens: 1234, completionTokens: 56 }],
  ['a streamed answer without events', { events: 0 }],
  ['no first byte', { ttfbMs: undefined, status: 499, outcome: 'client_closed', bytesOut: 0 }],
  ['non-finite numbers', { ms: Number.NaN, ttfbMs: Number.POSITIVE_INFINITY }],
];

test('the access-log line is the line pino writes, on the logger createLogger makes', () => {
  const out = new Capture();
  const logger = createLogger('info', out);
  assert.equal(new AccessLog(logger).fast, true);
  assert.equal(new AccessLog(createLogger('info')).fast, true);
  for (const [name, over] of CASES) {
    for (const failed of [false, true]) {
      const [ours, theirs] = both(logger, out, line(over), failed);
      assert.ok(theirs !== undefined, name);
      assert.equal(ours, theirs, `${name}, failed ${failed}`);
      assert.equal(JSON.parse(ours!).msg, 'request');
    }
  }
});

test('a line with an error goes through pino, its err written as the line describes it (no "type":"Object","stack":"")', () => {
  const out = new Capture();
  const logger = createLogger('info', out);
  const err = { type: 'Error', message: 'write EPIPE', code: 'EPIPE' };
  const [ours, theirs] = both(logger, out, line({ status: 502, outcome: 'upstream_error', err }), true);
  assert.equal(ours, theirs);
  assert.deepEqual(JSON.parse(ours!).err, err);
  // Errors logged elsewhere keep pino's serializer: their class, message and stack.
  logger.error({ err: Object.assign(new TypeError('x is undefined'), { code: 'EX' }) }, 'worker failed');
  const logged = JSON.parse(out.lines.at(-1)!).err as Record<string, unknown>;
  assert.equal(logged['type'], 'TypeError');
  assert.equal(logged['code'], 'EX');
  assert.match(String(logged['stack']), /^TypeError: x is undefined\n/);
});

test('the level decides: at warn only failed requests are logged, at silent none', () => {
  const out = new Capture();
  const logger = createLogger('warn', out);
  const log = new AccessLog(logger);
  assert.equal(log.enabled(false), false);
  assert.equal(log.enabled(true), true);
  log.write(line(), false);
  assert.equal(out.lines.length, 0);
  log.write(line({ status: 502, outcome: 'upstream_error' }), true);
  assert.equal(out.lines.length, 1);
  assert.equal(JSON.parse(out.lines[0]!).level, 40);
  logger.level = 'silent';
  log.write(line({ status: 502, outcome: 'upstream_error' }), true);
  assert.equal(out.lines.length, 1);
});

test('a child logger\'s bindings are in the line, as pino writes them', () => {
  const out = new Capture();
  const logger = createLogger('info', out).child({ worker: 2 });
  assert.equal(new AccessLog(logger).fast, true);
  const [ours, theirs] = both(logger, out, line(), false);
  assert.equal(ours, theirs);
  assert.equal(JSON.parse(ours!).worker, 2);
});

test('a logger that changes lines (mixin, redaction of a logged key, a log formatter, another message key) gets the same line as pino', () => {
  const out = new Capture();
  const loggers = [
    pino({ mixin: () => ({ extra: 1 }) }, out),
    pino({ redact: ['path'] }, out),
    pino({ formatters: { log: (o: Record<string, unknown>) => ({ ...o, formatted: true }) } }, out),
    pino({ messageKey: 'message' }, out),
  ];
  for (const logger of loggers) {
    assert.equal(new AccessLog(logger).fast, false);
    const [ours, theirs] = both(logger, out, line({ path: '/v1/"q"' }), false);
    assert.ok(theirs !== undefined);
    assert.equal(ours, theirs);
  }
});

test('millis writes a duration rounded to 3 decimals exactly as String() does, and anything else too', () => {
  const round = (ms: number): number => Math.round(ms * 1000) / 1000;
  for (let n = 0; n <= 300_000; n++) assert.equal(millis(n / 1000), String(n / 1000), String(n));
  let seed = 7;
  const random = (): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = 0; i < 100_000; i++) {
    const v = round(random() * 10 ** Math.floor(random() * 12));
    assert.equal(millis(v), String(v), String(v));
  }
  for (const v of [0.0001, 1.23456, -1, -0.5, 2 ** 44, 1e21, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.equal(millis(v), Number.isFinite(v) ? String(v) : 'null', String(v));
  }
});
