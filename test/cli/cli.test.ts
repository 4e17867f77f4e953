// The `sluice` command, black-box (docs/operations.md#the-command-line): each test runs `node dist/src/cli.js`.
// Exit codes: 0 ok, 1 invalid config or failed start (one-line reason first), 2 usage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '../../src/cli/token.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const DIGEST = 'ab'.repeat(32);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with a clean environment (no SLUICE_* or LOG_LEVEL from the test runner). */
function sluice(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = { ...process.env };
  for (const name of ['SLUICE_CONFIG', 'SLUICE_HOST', 'SLUICE_PORT', 'LOG_LEVEL']) delete base[name];
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, [CLI, ...args], { env: { ...base, ...env }, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') reject(err);
      else resolve({ code: child.exitCode, stdout, stderr });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), 'sluice-cli-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

function writeConfig(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const GOOD = writeConfig(
  'good.yaml',
  [
    'listen: { host: 127.0.0.1, port: 0 }',
    'services:',
    '  - slug: demo',
    `    tokens: [{ name: laptop, sha256: "${DIGEST}" }]`,
    '    replicas: { urls: ["http://127.0.0.1:9"] }',
    '  - slug: chat',
    `    tokens: [{ name: laptop, sha256: "${DIGEST}" }]`,
    '    replicas: { command: ["node", "server.js"] }',
    '',
  ].join('\n'),
);

const BAD = writeConfig(
  'bad.yaml',
  [
    'listen: { port: 70000 }',
    'workers: -1',
    'services:',
    '  - slug: Not_A_Slug',
    '    tokens: [{ name: laptop, sha256: "nothex" }]',
    '    timeouts: { responseHeadersMs: -5 }',
    '    uploads: { bufferBytes: 1MiB }',
    '    replicas: { urls: ["https://x:1"] }',
    '    colour: blue',
    '',
  ].join('\n'),
);

/** The problem lines of an invalid-config report (every line after the first). */
function problemLines(stderr: string): string[] {
  return stderr.trimEnd().split('\n').slice(1).map((l) => l.trim());
}

test('token prints a new token and the SHA-256 digest of it, with a config snippet', async () => {
  const run = await sluice(['token']);
  assert.equal(run.code, 0, run.stderr);
  const token = /^token:\s+(slc_[A-Za-z0-9_-]{43})$/m.exec(run.stdout)?.[1];
  const digest = /^sha256:\s+([0-9a-f]{64})$/m.exec(run.stdout)?.[1];
  assert.ok(token, run.stdout);
  assert.ok(digest, run.stdout);
  assert.equal(digest, sha256Hex(token));
  assert.ok(run.stdout.includes(`- { name: <name>, sha256: "${digest}" }`), run.stdout);
  const again = await sluice(['token']);
  assert.ok(!again.stdout.includes(token), 'each run makes a new token');
});

test('token --json prints {"token","sha256"}', async () => {
  const run = await sluice(['token', '--json']);
  assert.equal(run.code, 0, run.stderr);
  const out = JSON.parse(run.stdout) as { token: string; sha256: string };
  assert.deepEqual(Object.keys(out), ['token', 'sha256']);
  assert.match(out.token, /^slc_[A-Za-z0-9_-]{43}$/);
  assert.equal(out.sha256, sha256Hex(out.token));
});

test('token --name puts the name in the snippet', async () => {
  const run = await sluice(['token', '--name', 'ci-runner']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /- \{ name: ci-runner, sha256: "[0-9a-f]{64}" \}/);
});

test('check exits 0 on a good config', async () => {
  const run = await sluice(['check', '--config', GOOD]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout, 'config OK: 2 services\n');
  assert.equal(run.stderr, '');
});

test('check names the services reachable only through routers (no tokens of their own), and refuses one no router reaches', async () => {
  const routed = writeConfig(
    'routed.yaml',
    [
      'listen: { host: 127.0.0.1, port: 0 }',
      'services:',
      '  - { slug: chat, models: [llama], replicas: { urls: ["http://127.0.0.1:9"] } }',
      '  - { slug: coder, models: [coder-7b], replicas: { urls: ["http://127.0.0.1:9"] } }',
      `  - { slug: demo, tokens: [{ name: laptop, sha256: "${DIGEST}" }], replicas: { urls: ["http://127.0.0.1:9"] } }`,
      'routers:',
      `  - { slug: models, tokens: [{ name: app, sha256: "${DIGEST}" }] }`,
      '',
    ].join('\n'),
  );
  const run = await sluice(['check', '--config', routed]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(
    run.stdout,
    [
      'config OK: 3 services, 1 router',
      'router models (/api/v1/services/models/request/v1): llama → chat, coder-7b → coder',
      'reachable only through routers (no tokens of their own): chat, coder',
      '',
    ].join('\n'),
  );
  const unreachable = writeConfig('unreachable.yaml', ['services:', '  - { slug: chat, models: [llama], replicas: { urls: ["http://127.0.0.1:9"] } }', ''].join('\n'));
  const refused = await sluice(['check', '--config', unreachable]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /services\[0\]\.tokens: \(missing\) — must be set, or the service served by a router/);
});

test('check names each router with its models and their services, and each pool with its services', async () => {
  const path = writeConfig(
    'routed.yaml',
    [
      'listen: { host: 127.0.0.1, port: 0 }',
      'pools: [{ name: gpu, size: 2 }]',
      'routers:',
      `  - { slug: models, tokens: [{ name: ide, sha256: "${DIGEST}" }] }`,
      `  - { slug: chat-only, services: [chat], tokens: [{ name: app, sha256: "${DIGEST}" }] }`,
      'services:',
      '  - slug: chat',
      '    models: [llama-3.1-8b, llama-3.1-8b-instruct]',
      `    tokens: [{ name: laptop, sha256: "${DIGEST}" }]`,
      '    replicas: { command: ["node", "server.js"], pool: gpu }',
      '  - slug: coder',
      '    models: [qwen-coder]',
      `    tokens: [{ name: laptop, sha256: "${DIGEST}" }]`,
      '    replicas: { command: ["node", "server.js"], pool: gpu, units: 2 }',
      '  - slug: plain',
      `    tokens: [{ name: laptop, sha256: "${DIGEST}" }]`,
      '    replicas: { urls: ["http://127.0.0.1:9"] }',
      '',
    ].join('\n'),
  );
  const run = await sluice(['check', '-c', path]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(
    run.stdout,
    [
      'config OK: 3 services, 2 routers, 1 pool',
      'router models (/api/v1/services/models/request/v1): llama-3.1-8b → chat, llama-3.1-8b-instruct → chat, qwen-coder → coder',
      'router chat-only (/api/v1/services/chat-only/request/v1): llama-3.1-8b → chat, llama-3.1-8b-instruct → chat',
      'pool gpu (2 units): chat (1 unit), coder (2 units)',
      '',
    ].join('\n'),
  );
});

test('check reads SLUICE_CONFIG when --config is not given', async () => {
  const run = await sluice(['check'], { SLUICE_CONFIG: GOOD });
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^config OK: 2 services$/m);
});

test('check exits 1 on a bad config and lists every problem', async () => {
  const run = await sluice(['check', '-c', BAD]);
  assert.equal(run.code, 1);
  assert.equal(run.stdout, '');
  const [first] = run.stderr.split('\n');
  assert.equal(first, `sluice: invalid config ${BAD}: 8 problems`);
  const lines = problemLines(run.stderr);
  assert.equal(lines.length, 8, run.stderr);
  for (const key of [
    'listen.port: 70000',
    'workers: -1',
    'services[0].slug: "Not_A_Slug"',
    'services[0].tokens[0].sha256: "nothex"',
    'services[0].timeouts.responseHeadersMs: -5',
    'services[0].uploads.bufferBytes: "1MiB" — must be an integer ≥ 0',
    'services[0].replicas.urls[0]: "https://x:1"',
    'services[0].colour: "blue" — unknown key',
  ]) {
    assert.ok(lines.some((l) => l.startsWith(key)), `missing ${key} in:\n${run.stderr}`);
  }
  assert.equal(new Set(lines).size, lines.length, 'distinct problems');
});

test('check applies env overrides and names the variable', async () => {
  const run = await sluice(['check', '-c', GOOD], { SLUICE_PORT: 'eighty' });
  assert.equal(run.code, 1);
  assert.match(run.stderr, /listen\.port: "eighty" — .*SLUICE_PORT/);
});

test('check reports a YAML syntax error with its line and column', async () => {
  const path = writeConfig('syntax.yaml', 'services:\n  - slug: demo\n    tokens: [ { name: a }\n');
  const run = await sluice(['check', '-c', path]);
  assert.equal(run.code, 1);
  assert.match(run.stderr.split('\n')[0] ?? '', /^sluice: invalid config .*syntax\.yaml: syntax error at line \d+, column \d+$/);
});

test('serve with an invalid config exits 1 with a one-line reason first, then every problem', async () => {
  const run = await sluice(['serve', '--config', BAD]);
  assert.equal(run.code, 1);
  const [first, ...rest] = run.stderr.trimEnd().split('\n');
  assert.equal(first, `sluice: invalid config ${BAD}: 8 problems`);
  assert.equal(rest.length, 8);
  assert.equal(run.stdout, '', 'nothing started, nothing logged');
});

test('serve with a missing config file exits 1 with a one-line reason', async () => {
  const missing = join(dir, 'missing.yaml');
  const run = await sluice(['serve', '--config', missing]);
  assert.equal(run.code, 1);
  assert.match(run.stderr.split('\n')[0] ?? '', /^sluice: invalid config .*missing\.yaml: cannot read the file \(ENOENT/);
});

test('usage errors exit 2 with the usage on stderr', async () => {
  for (const args of [['frobnicate'], ['serve'], ['check'], ['serve', '--bogus'], ['token', 'extra'], ['check', '--config'], ['--verbose'], []]) {
    const run = await sluice(args);
    assert.equal(run.code, 2, `sluice ${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, /^sluice\b.*\n\nUsage: sluice <command>/, `sluice ${args.join(' ')}`);
    assert.equal(run.stdout, '');
  }
  const unknown = await sluice(['frobnicate']);
  assert.match(unknown.stderr, /^sluice: unknown command "frobnicate"\n/);
  const missing = await sluice(['serve']);
  assert.match(missing.stderr, /^sluice serve: missing --config FILE/);
});

test('--help prints the usage on stdout and exits 0', async () => {
  for (const args of [['--help'], ['-h'], ['help'], ['serve', '--help'], ['token', '-h']]) {
    const run = await sluice(args);
    assert.equal(run.code, 0, `sluice ${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stdout, /^Usage: sluice <command>/);
    assert.match(run.stdout, /serve --config FILE/);
    assert.equal(run.stderr, '');
  }
});
