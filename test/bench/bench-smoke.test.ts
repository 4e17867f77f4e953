// The benchmark's `--smoke` run (tiny sizes): it starts every peer and scenario, measures, writes
// its outputs, and stops every process it started. No figure is asserted — benchmarks are never
// timed tests; this only proves the suite runs end to end and leaves nothing behind. The same for
// `bench:pauses` at its smallest size.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));
const PAUSES = fileURLToPath(new URL('../../bench/pauses.js', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function bench(args: string[], env: Record<string, string> = {}, script = RUN): Promise<Run> {
  const base = { ...process.env };
  for (const name of Object.keys(base)) if (name.startsWith('BENCH_') || name.startsWith('SLUICE_')) delete base[name];
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, [script, ...args], { env: { ...base, ...env }, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') reject(err);
      else resolve({ code: child.exitCode, stdout, stderr });
    });
  });
}

/** Is `pid` a live process (not a zombie)? */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

interface SmokeRecord {
  mode: string;
  peers: { id: string; skipped?: string }[];
  processes: { name: string; pid: number }[];
  scenarios: {
    throughput: { rounds: Record<string, unknown[]> };
    ttfb: { rounds: Record<string, unknown[]> };
    tokens: { rounds: Record<string, unknown[]> };
    tokensFew: { rounds: Record<string, unknown[]> };
    slowReader: { peers: Record<string, unknown> };
    idleStreams: { peers: Record<string, unknown> };
    coldStart: { run: unknown };
    uploads: { rounds: Record<string, Record<string, unknown[]>> };
    heldUploads: { peers: Record<string, unknown> };
  };
  derived: { targets: unknown[] };
}

test('npm run bench -- --smoke starts, measures and stops every process, and writes its outputs', { timeout: 300_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), 'sluice-bench-smoke-'));
  try {
    const run = await bench(['--smoke', '--out', out]);
    assert.equal(run.code, 0, `bench --smoke exited ${run.code}:\n${run.stderr.slice(-3000)}`);
    for (const file of ['BENCHMARKS.md', 'results/latest.json', 'results/ttfb.svg']) assert.ok(existsSync(join(out, file)), `${file} written`);

    const rec = JSON.parse(readFileSync(join(out, 'results', 'latest.json'), 'utf8')) as SmokeRecord;
    assert.equal(rec.mode, 'smoke');
    const ran = rec.peers.filter((p) => p.skipped === undefined).map((p) => p.id);
    const relays = ran.filter((id) => id !== 'direct');
    // Every peer ran, except the system peers that are not installed (a smoke run never installs them).
    const system = new Set(['nginx', 'haproxy', 'caddy']);
    assert.deepEqual(
      rec.peers.filter((p) => p.skipped !== undefined).map((p) => p.id),
      rec.peers.filter((p) => system.has(p.id) && p.skipped !== undefined).map((p) => p.id),
    );
    for (const p of rec.peers.filter((p) => p.skipped !== undefined)) assert.match(p.skipped!, /is not installed/, `${p.id} skipped only for want of its program`);
    assert.ok(['direct', 'sluice-info', 'sluice-info-plain', 'sluice-warn', 'sluice-info-w2'].every((id) => ran.includes(id)), ran.join(', '));
    assert.ok(ran.includes('http-proxy') && ran.includes('fastify-proxy'));
    for (const scenario of ['throughput', 'ttfb', 'tokens', 'tokensFew'] as const) {
      assert.deepEqual(Object.keys(rec.scenarios[scenario].rounds).sort(), [...ran].sort(), `${scenario}: every peer measured`);
    }
    assert.deepEqual(Object.keys(rec.scenarios.idleStreams.peers).sort(), [...relays].sort(), 'idle streams: every relay measured');
    assert.ok('sluice-info' in rec.scenarios.slowReader.peers, 'slow reader: Sluice measured');
    if (ran.includes('nginx')) assert.ok('nginx' in rec.scenarios.slowReader.peers, 'slow reader: nginx measured');
    assert.notEqual(rec.scenarios.coldStart.run, null, 'cold start measured');
    for (const id of ['direct', 'sluice-info']) {
      assert.deepEqual(Object.keys(rec.scenarios.uploads.rounds[id] ?? {}).sort(), ['chunked', 'chunked-pieces', 'length'], `uploads: ${id} measured in every framing`);
    }
    assert.ok('sluice-info' in rec.scenarios.heldUploads.peers, 'held uploads: Sluice measured');
    assert.ok(rec.derived.targets.length > 0, 'targets reported');
    assert.match(readFileSync(join(out, 'BENCHMARKS.md'), 'utf8'), /## Targets/);
    assert.match(readFileSync(join(out, 'results', 'ttfb.svg'), 'utf8'), /^<svg /);

    // The replica, every relay (nginx included), the cold-start gateway and the replica it launched.
    const names = rec.processes.map((p) => p.name);
    assert.ok(names.includes('replica') && names.includes('sluice-cold') && names.some((n) => n.startsWith('cold replica')), names.join(', '));
    for (const id of relays) assert.ok(names.includes(id), `${id} process recorded`);
    const left = rec.processes.filter((p) => alive(p.pid));
    assert.deepEqual(left, [], 'no process the bench started is still running');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('the bench refuses an unknown argument before starting anything', async () => {
  const run = await bench(['--fast']);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /unknown argument "--fast"/);
});

test('bench:pauses measures the TTFB tail of the replica and Sluice, with the collections of each process', async () => {
  const run = await bench([], { BENCH_PAUSES_REQUESTS: '1000' }, PAUSES);
  assert.equal(run.code, 0, run.stderr);
  for (const peer of ['direct', 'sluice']) assert.match(run.stdout, new RegExp(`^${peer}: TTFB p50 \\d+ µs, p90 \\d+, p99 \\d+`, 'm'));
  assert.match(run.stdout, /^sluice: .*\n {2}the \d+ requests above p99 overlapped a collection in: the gateway \d+/m);
  for (const process of ['gateway', 'replica', 'client']) assert.match(run.stdout, new RegExp(`^ {2}${process} +[\\d.]+ collections per 1,000 requests`, 'm'));
});
