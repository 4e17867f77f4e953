// The front end's build (docs/architecture.md#the-front-ends-build): `sluice --version` and the
// `gateway listening` line name the build in use (with workers, every thread loads that one), and
// where no build loads, `sluice serve` exits 1 with one line naming what each build needs.
//
// That last case needs a Node for which no build loads here: CI gives one in SLUICE_NO_UWS_NODE
// (Node 24 on Debian 12, whose glibc 2.36 is older than v20.57.0 needs), or `none` on a platform
// where every installed Node loads a build (the Debian 13 leg). With CI=true it must be given.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BUILDS, loadUwsBuild } from '../../src/http/uws-build.js';
import { startGatewayProcess } from '../helpers/gateway-process.js';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const BUILD = await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined);
const NO_UWS_NODE = process.env['SLUICE_NO_UWS_NODE'];
const IN_CI = process.env['CI'] === 'true';

const dir = mkdtempSync(join(tmpdir(), 'sluice-uws-build-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function run(node: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

function configFile(): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(file, ['listen: { host: 127.0.0.1, port: 0 }', 'services:', '  - slug: svc', `    tokens: [{ name: t, sha256: "${TEST_TOKEN_SHA256}" }]`, '    replicas: { urls: ["http://127.0.0.1:9"] }', ''].join('\n'));
  return file;
}

test(`sluice --version names the build in use (${BUILD.id}), Node and the C library`, async () => {
  const { code, stdout, stderr } = await run(process.execPath, ['--version']);
  assert.equal(code, 0, stderr);
  assert.equal(stderr, '');
  const lines = stdout.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, stdout);
  assert.match(lines[0]!, /^sluice \d+\.\d+\.\d+ \(uWebSockets\.js /);
  assert.ok(lines[0]!.includes(`uWebSockets.js ${BUILD.id}`), lines[0]);
  assert.ok(lines[0]!.includes(`Node ${process.version}`), lines[0]);
});

test('the newest build that loads is chosen: no newer build in the list loads in this process', async () => {
  // The list is newest first; what came before the chosen one failed to load here.
  const index = BUILDS.findIndex((b) => b.id === BUILD.id);
  assert.ok(index >= 0);
  if (process.env['SLUICE_UWS_BUILD'] === undefined || process.env['SLUICE_UWS_BUILD'] === '') {
    for (const newer of BUILDS.slice(0, index)) {
      const { code, stderr } = await run(process.execPath, ['--version'], { SLUICE_UWS_BUILD: newer.specifier });
      assert.equal(code, 1, `${newer.id} loads here, yet ${BUILD.id} was chosen`);
      assert.match(stderr, /^sluice: no uWebSockets\.js build loads on Node /);
    }
  }
});

test('SLUICE_UWS_BUILD naming no build: exit 1 with one line listing the builds', async () => {
  const { code, stdout, stderr } = await run(process.execPath, ['serve', '--config', configFile()], { SLUICE_UWS_BUILD: 'uws-nope' });
  assert.equal(code, 1);
  assert.equal(stdout, '');
  assert.equal(stderr, `sluice: SLUICE_UWS_BUILD=uws-nope names no uWebSockets.js build; choose one of ${BUILDS.map((b) => b.id).join(', ')}\n`);
});

test('gateway listening names the build, with one thread and with two workers', async () => {
  for (const workers of [1, 2]) {
    const gateway = await startGatewayProcess({ workers, services: [{ slug: 'svc', tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }], replicas: { urls: ['http://127.0.0.1:9'] } }] });
    try {
      const line = gateway.output().split('\n').find((l) => l.includes('gateway listening'))!;
      const listening = JSON.parse(line) as { uws: string; workers: number };
      assert.equal(listening.uws, BUILD.id);
      assert.equal(listening.workers, workers);
      // Every worker loaded the main thread's build and answers.
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`http://127.0.0.1:${gateway.port}/healthz`);
        assert.equal(res.status, 200);
        await res.arrayBuffer();
      }
    } finally {
      await gateway.stop();
    }
  }
});

const noUwsSkip =
  NO_UWS_NODE === undefined
    ? IN_CI
      ? false // runs, and fails: CI must say which Node has no build here, or `none`
      : 'no SLUICE_NO_UWS_NODE: set it to a Node for which no build loads here (.ci/run sets Node 24 on Debian 12)'
    : NO_UWS_NODE === 'none'
      ? 'SLUICE_NO_UWS_NODE=none: every Node on this platform loads a build'
      : false;

test('where no build loads, sluice serve and --version exit 1 with one line: each build\'s needs and what to do', { skip: noUwsSkip }, async () => {
  assert.ok(NO_UWS_NODE !== undefined, 'CI=true and no SLUICE_NO_UWS_NODE: .ci/run should have set it (a Node path, or none)');
  for (const args of [['serve', '--config', configFile()], ['--version']]) {
    const { code, stdout, stderr } = await run(NO_UWS_NODE, args);
    assert.equal(code, 1, `${args[0]}: ${stderr}`);
    assert.equal(stdout, '', `${args[0]}: nothing on stdout`);
    const lines = stderr.split('\n');
    assert.equal(lines.length, 2, `${args[0]}: one line: ${stderr}`);
    assert.equal(lines[1], '');
    assert.match(lines[0]!, /^sluice: no uWebSockets\.js build loads on Node v\d+\.\d+\.\d+ with (glibc \d+\.\d+|.+): /);
    for (const build of BUILDS) assert.ok(lines[0]!.includes(`${build.id} needs ${build.node} with ${build.libc}`), lines[0]);
    assert.match(lines[0]!, /; run Node 22 here, or Node 24 on a newer C library/);
  }
});
