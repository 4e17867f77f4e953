// Tracing through the command line (docs/operations.md#traces): `sluice check` validates the
// OTEL_* variables with the file, naming each; `sluice serve` with only OTEL_EXPORTER_OTLP_ENDPOINT
// traces; a SIGHUP that changes `tracing` (here to another collector, in OTLP/JSON) applies it in
// every worker thread, and requests after it are traced there.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { KIND, type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { CLI, type CliGateway, connectionsOnEveryWorker, startCliGateway, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

const TOKEN = 'slc_token_of_the_tracing_cli_test_0123456789abcdef';
const receivers: OtlpReceiver[] = [];
const open: WorkerConnection[] = [];
let gw: CliGateway | undefined;
let replica: TestReplica | undefined;

after(async () => {
  for (const c of open) await c.client.close();
  if (gw !== undefined && gw.child.exitCode === null) {
    gw.child.kill('SIGTERM');
    await gw.exited;
  }
  await replica?.close();
  for (const r of receivers) await r.close();
});

function check(config: Record<string, unknown>, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const file = join(mkdtempSync(join(tmpdir(), 'sluice-trace-')), 'config.json');
  writeFileSync(file, JSON.stringify(config));
  const base = { ...process.env };
  for (const name of Object.keys(base)) if (name.startsWith('OTEL_')) delete base[name];
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [CLI, 'check', '-c', file], { env: { ...base, ...env } }, (_err, stdout, stderr) => resolve({ code: child.exitCode, out: stdout + stderr }));
  });
}

function config(tracing?: Record<string, unknown>): Record<string, unknown> {
  return { workers: 2, services: [{ slug: 'svc', tokens: [{ name: 'caller', sha256: sha256Hex(TOKEN) }], replicas: { urls: [replica?.url ?? 'http://127.0.0.1:9'] } }], ...(tracing === undefined ? {} : { tracing }) };
}

test('sluice check names each OTEL_* variable that is wrong, and accepts good ones', async () => {
  const bad = await check(config(), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' });
  assert.equal(bad.code, 1);
  assert.match(bad.out, /OTEL_TRACES_SAMPLER_ARG: "half" — must be a number from 0 to 1/);
  const good = await check(config(), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' });
  assert.equal(good.code, 0, good.out);
});

async function send(c: WorkerConnection): Promise<string> {
  const res = await c.client.request({ path: '/api/v1/services/svc/request/v1/x', method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: '{}' });
  assert.equal(res.statusCode, 200);
  await res.body.dump();
  return String(res.headers['x-request-id']);
}

test('workers: 2 — the environment turns tracing on; SIGHUP moves it to another collector (OTLP/JSON) in every worker', async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('ok');
  });
  const first = await startOtlpReceiver();
  const second = await startOtlpReceiver();
  receivers.push(first, second);
  gw = await startCliGateway(config(), { OTEL_EXPORTER_OTLP_ENDPOINT: first.url.replace(/\/v1\/traces$/, '') });
  const before = (await connectionsOnEveryWorker(gw, gw.origin, 2, 1)).flat();
  open.push(...before);
  const ids: string[] = [];
  for (const c of before) ids.push(await send(c));
  await first.waitFor((spans) => ids.every((id) => spans.some((s) => s.kind === KIND.server && s.attributes['sluice.request.id'] === id)));
  assert.ok(first.contentTypes.every((t) => t === 'application/x-protobuf'));

  writeFileSync(gw.configFile, JSON.stringify({ listen: { host: '127.0.0.1', port: gw.port }, ...config({ endpoint: second.url, protocol: 'http/json', serviceName: 'after-reload' }) }));
  gw.child.kill('SIGHUP');
  await eventually(() => [0, 1].every((w) => gw!.logs.some((l) => l.msg === 'tracing reloaded' && l.worker === w)), 10_000, 'both workers to reload tracing');
  const fresh = (await connectionsOnEveryWorker(gw, gw.origin, 2, 1)).flat();
  open.push(...fresh);
  const later: string[] = [];
  for (const c of fresh) later.push(await send(c));
  await second.waitFor((spans) => later.every((id) => spans.some((s) => s.kind === KIND.server && s.attributes['sluice.request.id'] === id)));
  assert.ok(second.contentTypes.every((t) => t.startsWith('application/json')));
  assert.ok(second.spans.every((s) => s.resource['service.name'] === 'after-reload'));
  const restart = gw.logs.filter((l) => l.msg === 'config changes other than tokens take effect on restart').flatMap((l) => l['keys'] as string[]);
  assert.ok(!restart.includes('tracing'), `tracing is not among the keys that wait for a restart: ${restart.join(', ')}`);
});
