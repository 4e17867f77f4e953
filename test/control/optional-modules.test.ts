// A gateway imports the Kubernetes client and the Redis client only when its config uses them
// (gateway/gateway.ts `startGateway`, `ReplicaKind.load`): the Kubernetes client alone holds about
// 28 MB of heap, which every major collection of a gateway would otherwise mark again. Each case
// runs `sluice serve` with a loader hook that records every module the process loads
// (fixtures/record-loads.ts); the gateway's own module in the record shows the recorder works.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startGatewayProcess } from '../helpers/gateway-process.js';
import { TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { closedPort } from '../helpers/replica.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const RECORDER = fileURLToPath(new URL('../fixtures/record-loads.js', import.meta.url));
const KUBERNETES = '/node_modules/@kubernetes/client-node/';
const REDIS = '/node_modules/redis/';
const GATEWAY = '/src/gateway/gateway.js';

const dir = mkdtempSync(join(tmpdir(), 'sluice-optional-modules-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function recordFile(): string {
  const file = join(dir, `loads-${files++}.txt`);
  writeFileSync(file, '');
  return file;
}

const loaded = (file: string): string[] => readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
const any = (urls: string[], part: string): boolean => urls.some((u) => u.includes(part));

function service(replicas: Record<string, unknown>): Record<string, unknown> {
  return { slug: 'svc', tokens: [{ name: 't', sha256: TEST_TOKEN_SHA256 }], replicas };
}

async function served(config: Record<string, unknown>): Promise<string[]> {
  const file = recordFile();
  const gateway = await startGatewayProcess(config, { nodeArgs: ['--import', RECORDER], env: { SLUICE_TEST_LOADS: file } });
  try {
    return loaded(file);
  } finally {
    await gateway.stop();
  }
}

test('static replicas and no limit store: neither the Kubernetes client nor the Redis client is loaded', async () => {
  const urls = await served({ workers: 1, services: [service({ urls: [`http://127.0.0.1:${await closedPort()}`] })] });
  assert.ok(any(urls, GATEWAY), 'the recorder saw the gateway load');
  assert.ok(!any(urls, KUBERNETES), urls.filter((u) => u.includes(KUBERNETES)).slice(0, 3).join('\n'));
  assert.ok(!any(urls, REDIS), urls.filter((u) => u.includes(REDIS)).slice(0, 3).join('\n'));
});

test('a limit store in Redis loads the Redis client, still not the Kubernetes client', async () => {
  const store = `redis://127.0.0.1:${await closedPort()}`;
  const limited = { ...service({ urls: [`http://127.0.0.1:${await closedPort()}`] }), limits: { requestsPerMinute: 60 } };
  const urls = await served({ workers: 1, limits: { store, onStoreDown: 'allow' }, services: [limited] });
  assert.ok(any(urls, REDIS));
  assert.ok(!any(urls, KUBERNETES));
});

test('a Kubernetes service loads the Kubernetes client before its start fails on the missing kubeconfig', async () => {
  const missing = join(dir, 'no-such-kubeconfig');
  const config = join(dir, 'kube.json');
  const kubernetes = { namespace: 'default', deployment: 'llama', service: 'llama', port: 'http', kubeconfig: missing };
  writeFileSync(config, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, services: [service({ kubernetes })] }));
  const file = recordFile();
  const child = spawn(process.execPath, ['--import', RECORDER, CLI, 'serve', '--config', config], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SLUICE_TEST_LOADS: file } });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  assert.equal(code, 1, stderr);
  assert.ok(stderr.includes(missing), stderr);
  const urls = loaded(file);
  assert.ok(any(urls, KUBERNETES));
  assert.ok(!any(urls, REDIS));
});
