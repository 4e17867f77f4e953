// The container image, without a Docker engine: the Dockerfile passes two linters (dockerfilelint
// and dockerfile-utils, from the npm registry), stays in step with package.json (npm ci, the
// build script, every path in `files`, the bin as an exec-form ENTRYPOINT), with the docker lines
// of docs/operations.md and with the README's install step; and its start command and
// HEALTHCHECK, run here with the image's environment, serve, report healthy, and drain on SIGTERM
// to exit 0.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DEFAULTS } from '../../src/config/schema.js';
import { DOCKERFILE, all, envOf, execForm, healthcheckCommand, one, readDockerfile } from '../helpers/dockerfile.js';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { closedPort } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  files: string[];
  scripts: Record<string, string>;
  engines: { node: string };
};
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const operations = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');

const stages = readDockerfile();
const final = stages.at(-1)!;

test('two linters from the npm registry find nothing in the Dockerfile', async () => {
  const require = createRequire(import.meta.url);
  const linters = [
    ['dockerfilelint', 'bin/dockerfilelint'],
    ['dockerfile-utils', 'bin/dockerfile-utils', 'lint'],
  ] as const;
  for (const [name, bin, ...args] of linters) {
    const script = join(dirname(require.resolve(`${name}/package.json`)), bin);
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(process.execPath, [script, ...args, DOCKERFILE], { cwd: ROOT }, (err, stdout, stderr) => {
        resolve({ code: typeof err?.code === 'number' ? err.code : err ? -1 : 0, output: stdout + stderr });
      });
    });
    assert.equal(code, 0, `${name} found problems:\n${output}`);
  }
});

test('every stage is Node 24 on Debian 13 trixie: the newest LTS, with a glibc that loads the newest uWebSockets.js build', () => {
  // docs/architecture.md#the-front-ends-build: v20.57.0 needs glibc >= 2.38 (trixie has 2.41);
  // uws-pack has no Node 24 binary. The stages share one base, so what npm ci installs is what runs.
  for (const stage of stages) assert.match(stage.from, /^node:24-trixie(-slim)?$/, `FROM ${stage.from}`);
  assert.equal(new Set(stages.map((s) => s.from)).size, 1, 'one base image for every stage');
  assert.match(readFileSync(join(ROOT, 'docs/operations.md'), 'utf8'), /Node 24 on Debian 13 \(trixie/);
});

test('multi-stage: built with npm ci and the build script, run with production dependencies only', () => {
  assert.ok(stages.length >= 2, 'a build stage and a runtime stage');
  const runs = stages.flatMap((s) => all(s, 'RUN').map((i) => i.args));
  assert.ok(runs.some((r) => /^npm ci\b/.test(r) && !r.includes('--omit=dev')), 'a stage installs every dependency with npm ci');
  assert.ok(runs.some((r) => /^npm ci\b.*--omit=dev/.test(r)), 'a stage installs production dependencies only with npm ci --omit=dev');
  assert.ok(runs.some((r) => r === 'npm run build'), 'the build runs the package.json build script');
  assert.match(pkg.scripts.build!, /^tsc\b/);
  assert.equal(all(final, 'RUN').length, 0, 'the runtime stage installs nothing itself');
  const fromDeps = all(final, 'COPY').find((c) => c.args.endsWith(' node_modules'));
  assert.ok(fromDeps !== undefined, 'node_modules comes from another stage');
  const depsStage = stages.find((s) => fromDeps.flags['from'] === s.name);
  assert.ok(depsStage !== undefined && all(depsStage, 'RUN').some((r) => r.args.includes('--omit=dev')), 'node_modules holds production dependencies only');
  // Every stage runs the same Node major, one the package supports.
  const majors = new Set(stages.map((s) => /^node:(\d+)/.exec(s.from)?.[1]));
  assert.equal(majors.size, 1, `one Node image for every stage: ${[...majors].join(', ')}`);
  const major = Number([...majors][0]);
  assert.ok(major >= Number(/\d+/.exec(pkg.engines.node)?.[0]), `node:${major} satisfies engines ${pkg.engines.node}`);
});

test('the runtime stage holds every path package.json ships, and runs the bin directly as a non-root user', () => {
  const copied = all(final, 'COPY').map((c) => {
    const parts = c.args.split(/\s+/);
    return { from: c.flags['from'], src: parts.slice(0, -1), dest: parts.at(-1)! };
  });
  for (const path of [...pkg.files, 'package.json']) {
    const hit = copied.find((c) => c.src.some((s) => s === path || s.endsWith(`/${path}`)) && (c.dest === path || c.dest === `${path}/` || c.dest === './' || path.startsWith(c.dest)));
    assert.ok(hit !== undefined, `the image copies ${path} (package.json files)`);
    // The build output comes from the build stage, where `npm run build` wrote it.
    if (path.startsWith('dist/')) assert.ok(hit.from !== undefined, `${path} comes from the build stage`);
  }
  const bin = pkg.bin.sluice!;
  assert.ok(pkg.files.some((f) => bin === f || bin.startsWith(`${f}/`)), 'the bin is shipped');
  const entrypoint = execForm(one(final, 'ENTRYPOINT').args);
  assert.deepEqual(entrypoint, ['node', bin], 'exec form, no shell: SIGTERM reaches Node');
  assert.deepEqual(execForm(one(final, 'CMD').args), ['serve']);
  assert.equal(one(final, 'STOPSIGNAL').args, 'SIGTERM');
  const user = one(final, 'USER').args;
  assert.ok(!/^(root|0)(:|$)/.test(user), `USER ${user} is not root`);
  assert.equal(one(final, 'EXPOSE').args, String(DEFAULTS.port));
  const env = envOf(final);
  assert.equal(env.NODE_ENV, 'production');
  assert.equal(env.SLUICE_HOST, '0.0.0.0', 'reachable from outside the container');
  assert.equal(env.SLUICE_PORT, undefined, 'the port is the config’s (listen.port), not overridden by the image');
  assert.match(env.SLUICE_CONFIG ?? '', /^\/etc\/sluice\/\S+\.ya?ml$/);
});

test('the HEALTHCHECK asks /healthz with node, in exec form', () => {
  const cmd = healthcheckCommand(final);
  assert.ok(cmd !== undefined, 'exec form');
  assert.equal(cmd[0], 'node', 'no curl or wget in the slim image');
  assert.match(cmd.join(' '), /\/healthz/);
});

test("the docker lines of docs/operations.md match the image: build, port, and the config mounted at SLUICE_CONFIG", () => {
  const env = envOf(final);
  assert.match(operations, /^docker build -t sluice \.$/m);
  const runs = operations.split('\n').filter((l) => l.startsWith('docker run ') && l.includes(env.SLUICE_CONFIG!));
  assert.ok(runs.length > 0, `a docker run line mounting the config at ${env.SLUICE_CONFIG}`);
  for (const run of runs) {
    // Each mounts the config where the image reads it, read-only, and runs the image's serve or check.
    assert.match(run, new RegExp(`-v \\S+:${env.SLUICE_CONFIG!.replace(/\./g, '\\.')}:ro\\b`), run);
    assert.match(run, /\bsluice(?: check)?$/, run);
  }
  const run = runs.find((l) => /\bsluice$/.test(l));
  assert.ok(run !== undefined, 'a docker run line that serves (the image with its default command)');
  assert.match(run, new RegExp(`-p \\d+:${DEFAULTS.port}\\b`));
  // The README's install step is the Dockerfile's: npm ci.
  assert.match(readme, /^npm ci && npm test\b/m);
  const dockerignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
  for (const entry of ['node_modules', 'dist']) assert.ok(dockerignore.includes(entry), `.dockerignore keeps the host's ${entry} out of the build`);
});

test("the image's start command with the image's environment serves, passes its HEALTHCHECK, and drains on SIGTERM", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-image-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, ['services:', '  - slug: svc', `    tokens: [{ name: t, sha256: "${TEST_TOKEN_SHA256}" }]`, '    replicas: { urls: ["http://127.0.0.1:9"] }', ''].join('\n'));
  const port = await closedPort();
  // The image's ENV, with the config where docs/operations.md mounts it (here: a temporary file) and a
  // free port instead of 8080 (the machine may be using it).
  const env = { ...process.env, ...envOf(final), SLUICE_CONFIG: configFile, SLUICE_PORT: String(port), LOG_LEVEL: 'info' };
  const [node, ...args] = [...execForm(one(final, 'ENTRYPOINT').args)!, ...execForm(one(final, 'CMD').args)!];
  assert.equal(node, 'node');
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  await eventually(() => output.includes('gateway listening') || child.exitCode !== null, 10_000, 'the gateway to listen');
  assert.equal(child.exitCode, null, output);
  const listening = JSON.parse(output.split('\n').find((l) => l.includes('gateway listening'))!) as { host: string; port: number };
  assert.deepEqual({ host: listening.host, port: listening.port }, { host: '0.0.0.0', port });

  const [hcNode, ...hcArgs] = healthcheckCommand(final)!;
  assert.equal(hcNode, 'node');
  const healthy = spawn(process.execPath, hcArgs, { env, stdio: 'ignore' });
  assert.deepEqual(await once(healthy, 'exit'), [0, null], 'HEALTHCHECK passes while serving');

  child.kill('SIGTERM');
  assert.deepEqual(await once(child, 'exit'), [0, null], output);
  const unhealthy = spawn(process.execPath, hcArgs, { env, stdio: 'ignore' });
  assert.deepEqual(await once(unhealthy, 'exit'), [1, null], 'HEALTHCHECK fails once the gateway is gone');
});
