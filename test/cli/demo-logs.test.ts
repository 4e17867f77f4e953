// Logs people can read: `sluice demo` (what `npm start` runs) prints one human-readable line per
// event (time, level, message, data), not JSON; `sluice serve` keeps JSON lines for collectors.
// On the way, the demo's first streamed request shows its cold start: keep-alive comments while
// the toy model loads, then the tokens.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DEV_TOKEN } from '../../src/cli/demo.js';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { closedPort } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

function run(args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const base = { ...process.env };
  for (const name of ['SLUICE_CONFIG', 'SLUICE_HOST', 'SLUICE_PORT', 'LOG_LEVEL']) delete base[name];
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let text = '';
  child.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  return { child, output: () => text };
}

function isJson(line: string): boolean {
  try {
    return typeof JSON.parse(line) === 'object';
  } catch {
    return false;
  }
}

/** Lines that look like log lines: `[12:34:56.789] INFO: message {…}`. */
const LOG_LINE = /^\[\d\d:\d\d:\d\d\.\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL): (.+)$/;

test('the demo prints readable log lines: time, level, message and data, no JSON lines', async () => {
  const port = await closedPort();
  const demo = run(['demo'], { SLUICE_PORT: String(port) });
  await eventually(() => demo.output().includes('Press Ctrl-C to stop.'), 20_000, 'the demo banner');

  // The banner's streamed request meets the cold start: kept alive with two or three comments
  // while the toy model loads, then its tokens (the demo config's queue.keepAliveMs).
  const streamed = await fetch(`http://127.0.0.1:${port}/api/v1/services/demo/request/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${DEV_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo', stream: true, messages: [{ role: 'user', content: 'Hello there' }] }),
  });
  assert.equal(streamed.status, 200);
  const events = await streamed.text();
  const comments = events.split(': waiting for a replica\n\n').length - 1;
  assert.ok(comments >= 2, `comments while the model loads: ${comments}`);
  assert.ok(events.startsWith(': waiting for a replica\n\n'.repeat(comments)), 'the comments come first, then the tokens');
  assert.ok(events.endsWith('data: [DONE]\n\n'), events);
  assert.ok(demo.output().includes("': waiting for a replica' comment every 1 s"), 'the banner says what to expect');

  // A request: the cold start and the request line are logged.
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/services/demo/request/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${DEV_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'Hi' }] }),
  });
  assert.equal(res.status, 200);
  await res.text();
  await eventually(() => /INFO: request /.test(demo.output()), 10_000, 'the request log line');

  demo.child.kill('SIGINT');
  const [code] = (await once(demo.child, 'exit')) as [number | null];
  assert.equal(code, 0, demo.output());

  const lines = demo.output().split('\n').filter((l) => l.trim() !== '');
  assert.deepEqual(lines.filter(isJson), [], 'no JSON lines');
  const messages = lines.map((l) => LOG_LINE.exec(l)?.[2]).filter((m): m is string => m !== undefined);
  for (const expected of ['gateway listening', 'replica state', 'replica process spawned', 'request', 'draining', 'stopped']) {
    assert.ok(
      messages.some((m) => m === expected || m.startsWith(`${expected} {`)),
      `a readable "${expected}" line in:\n${lines.join('\n')}`,
    );
  }
  // The data stays on the line, and the token never shows up in a log line.
  const request = messages.find((m) => m.startsWith('request {'))!;
  assert.match(request, /"service":"demo".*"status":200/);
  assert.ok(!lines.some((l) => LOG_LINE.test(l) && l.includes(DEV_TOKEN)), 'no token in a log line');
});

test('serve keeps JSON lines', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-serve-json-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const configFile = join(dir, 'config.yaml');
  const port = await closedPort();
  writeFileSync(
    configFile,
    [`listen: { host: 127.0.0.1, port: ${port} }`, 'services:', '  - slug: svc', `    tokens: [{ name: t, sha256: "${TEST_TOKEN_SHA256}" }]`, '    replicas: { urls: ["http://127.0.0.1:9"] }', ''].join('\n'),
  );
  const serve = run(['serve', '--config', configFile], {});
  await eventually(() => serve.output().includes('gateway listening'), 10_000, 'the gateway to listen');
  serve.child.kill('SIGTERM');
  const [code] = (await once(serve.child, 'exit')) as [number | null];
  assert.equal(code, 0, serve.output());
  const lines = serve.output().split('\n').filter((l) => l !== '');
  assert.ok(lines.length >= 3, serve.output());
  for (const line of lines) assert.ok(isJson(line), `a JSON line: ${line}`);
  const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
  assert.ok(msgs.includes('gateway listening') && msgs.includes('stopped'), msgs.join(', '));
});
