// The pool benchmark (`npm run bench:pools`) in its smoke size: four models on two units behind a
// router, both policies, a few seconds of trace with a short load time. It checks the report's
// shape, that every request was answered in full (0 lost) and that every process it started is
// gone. No figure is bounded: benchmarks are never timed tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

interface Figures {
  requests: number;
  lost: number;
  statuses: Record<string, number>;
  evictions: number;
  swaps: number;
  coldStarts: number;
  swapAddedMs: { n: number; p50: number };
  ttftMs: { n: number; p50: number; p99: number };
  ttftByModel: Record<string, { n: number; p50: number; p99: number }>;
}

interface PoolsRecord {
  mode: string;
  processes: { name: string; pid: number }[];
  policies: Record<string, { figures: Figures; starts: { model: string; evicted?: { model: string } }[]; requests: { model: string }[] }>;
}

test('bench:pools --smoke plays the trace under both policies, loses no request, and stops every process', { timeout: 300_000 }, async () => {
  const out = mkdtempSync(join(tmpdir(), 'sluice-bench-pools-'));
  try {
    const env = { ...process.env };
    for (const name of Object.keys(env)) if (name.startsWith('BENCH_') || name.startsWith('SLUICE_')) delete env[name];
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = execFile(process.execPath, [RUN, 'pools', '--smoke', '--out', out], { env, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, _stdout, stderr) => {
        if (err && typeof err.code !== 'number') reject(err);
        else resolve({ code: child.exitCode, stderr });
      });
    });
    assert.equal(run.code, 0, `bench:pools --smoke exited ${run.code}:\n${run.stderr.slice(-3000)}`);
    for (const file of ['BENCHMARKS.md', 'results/pools.json']) assert.ok(existsSync(join(out, file)), `${file} written`);

    const rec = JSON.parse(readFileSync(join(out, 'results', 'pools.json'), 'utf8')) as PoolsRecord;
    assert.equal(rec.mode, 'smoke');
    assert.deepEqual(Object.keys(rec.policies), ['sluice-pool', 'llama-swap-groups']);
    const models = new Set(rec.policies['sluice-pool']!.requests.map((r) => r.model));
    assert.ok(models.size >= 3, `the smoke trace asks for ${models.size} models: more than the two units hold`);
    for (const [policy, { figures: f, starts }] of Object.entries(rec.policies)) {
      assert.ok(f.requests > 0, `${policy}: requests played`);
      assert.equal(f.lost, 0, `${policy}: every request answered 200 with all its tokens (${JSON.stringify(f.statuses)})`);
      assert.deepEqual(f.statuses, { '200': f.requests });
      // Three models or more on two units, with no idle stops: someone was evicted.
      assert.ok(f.evictions >= 1, `${policy}: ${f.evictions} evictions`);
      assert.equal(f.swaps, f.evictions, `${policy}: the journals show each eviction's start`);
      assert.equal(f.swapAddedMs.n, f.swaps);
      assert.ok(f.coldStarts >= 1 && starts.length === f.swaps + f.coldStarts);
      for (const s of starts.filter((x) => x.evicted !== undefined)) assert.notEqual(s.evicted!.model, s.model, 'a swap replaces another model');
      assert.equal(f.ttftMs.n, f.requests);
      assert.deepEqual(Object.keys(f.ttftByModel).sort(), [...models].sort());
      for (const t of Object.values(f.ttftByModel)) assert.ok(t.p50 > 0 && t.p99 >= t.p50);
    }
    const md = readFileSync(join(out, 'BENCHMARKS.md'), 'utf8');
    assert.match(md, /<!-- pools:begin[^]*## Pool swaps: four models on two units[^]*\| sluice-pool \| \d+ \| 0 \|[^]*\| llama-swap-groups \| \d+ \| 0 \|[^]*<!-- pools:end -->/);

    // The gateways and every replica they launched are gone.
    const names = rec.processes.map((p) => p.name);
    assert.ok(names.includes('gateway sluice-pool') && names.some((n) => n.startsWith('replica llama-swap-groups ')), names.join(', '));
    assert.deepEqual(rec.processes.filter((p) => alive(p.pid)), [], 'no process the bench started is still running');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
