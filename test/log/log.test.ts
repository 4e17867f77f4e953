// The process logger on its real destination (stdout, batched): lines gathered in memory reach
// stdout on logger.flush and when the process exits, whole and in order, with pino's ISO time.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const LOG = fileURLToPath(new URL('../../src/log/logger.js', import.meta.url));
const TUNABLES = fileURLToPath(new URL('../../src/tunables.js', import.meta.url));

/** Runs `body` in a child process that has `logger = createLogger('info')`; resolves with its stdout. */
function runChild(body: string): Promise<string> {
  const script = `import { createLogger } from ${JSON.stringify(LOG)};\nconst logger = createLogger('info');\n${body}`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { timeout: 20_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function parse(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('every line logged before process.exit reaches stdout, in order, with an ISO time', async () => {
  const before = Date.now();
  const stdout = await runChild(`
    for (let i = 0; i < 5000; i++) logger.info({ i, authorization: 'Bearer secret', service: 'svc' }, 'request');
    logger.warn({ last: true }, 'the end');
    process.exit(0);
  `);
  const after = Date.now();
  const lines = parse(stdout);
  assert.equal(lines.length, 5001);
  lines.slice(0, 5000).forEach((line, i) => {
    assert.equal(line['i'], i);
    assert.equal(line['msg'], 'request');
    assert.equal(line['authorization'], '[redacted]');
  });
  assert.equal(lines[5000]!['msg'], 'the end');
  assert.ok(!stdout.includes('secret'));
  for (const line of lines) {
    assert.match(line['time'] as string, ISO);
    const ms = Date.parse(line['time'] as string);
    assert.ok(ms >= before - 5 && ms <= after + 5, `time ${String(line['time'])} within the run`);
  }
});

test('logger.flush(cb) writes what was gathered; lines of a quiet logger still appear, and the process exits by itself', async () => {
  const stdout = await runChild(`
    logger.info({ n: 1 }, 'one');
    logger.flush(() => {
      process.stdout.write('FLUSHED\\n');
      logger.info({ n: 2 }, 'two');
    });
  `);
  const [first, marker, ...rest] = stdout.split('\n');
  assert.equal(JSON.parse(first!)['msg'], 'one');
  assert.equal(marker, 'FLUSHED');
  assert.deepEqual(
    rest.filter((line) => line !== '').map((line) => JSON.parse(line)['msg']),
    ['two'],
  );
});

test('lines of any size and any characters arrive whole and in order: multi-byte UTF-8, and lines larger than a batch', async () => {
  const stdout = await runChild(`
    const big = 'x'.repeat(40 * 1024);
    for (let i = 0; i < 3000; i++) {
      if (i % 500 === 7) logger.info({ i, big }, 'big');
      else logger.info({ i, text: 'café ☕ 日本語 🚀'.repeat(i % 5) }, 'utf8');
    }
    process.exit(0);
  `);
  const lines = parse(stdout);
  assert.equal(lines.length, 3000);
  lines.forEach((line, i) => {
    assert.equal(line['i'], i);
    if (i % 500 === 7) assert.equal((line['big'] as string).length, 40 * 1024);
    else assert.equal(line['text'], 'café ☕ 日本語 🚀'.repeat(i % 5));
  });
});

test('a quiet logger writes nothing: the flush clock makes no empty writes between lines', async () => {
  // The child counts sonic-boom's writes (through the fs module it shares), logs one line, waits
  // until that line was written, then for four more ticks of the flush clock's period.
  const stdout = await runChild(`
    import fs from 'node:fs';
    import { LOG_FLUSH_EVERY_MS } from ${JSON.stringify(TUNABLES)};
    const write = fs.write;
    let empty = 0;
    let full = 0;
    fs.write = function (fd, buf, ...rest) {
      if (fd === 1) buf.length === 0 ? empty++ : full++;
      return write.call(this, fd, buf, ...rest);
    };
    logger.info({ n: 1 }, 'one');
    const written = setInterval(() => {
      if (full === 0) return;
      clearInterval(written);
      let ticks = 0;
      const clock = setInterval(() => {
        if (++ticks < 4) return;
        clearInterval(clock);
        process.stdout.write('WRITES ' + JSON.stringify({ empty, full }) + '\\n');
      }, LOG_FLUSH_EVERY_MS);
    }, 10);
  `);
  const [line, counts] = stdout.split('\n');
  assert.equal(JSON.parse(line!)['msg'], 'one');
  assert.deepEqual(JSON.parse(counts!.replace('WRITES ', '')), { empty: 0, full: 1 });
});
