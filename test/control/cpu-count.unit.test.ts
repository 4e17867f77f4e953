// availableCpus: the workers default follows the cgroup CPU quota, not the host's CPU count.
// Each test builds a fake cgroup file system in a temporary directory.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { availableCpus, cgroupCpuLimit, resolveWorkers } from '../../src/gateway/cpu-count.js';

const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A fake cgroup root with the given files (paths relative to it). */
function cgroupFs(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'sluice-cgroup-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('cgroup v2', () => {
  test('a container limited to 2 CPUs on a 64-CPU host gets 2', () => {
    const root = cgroupFs({ 'cpu.max': '200000 100000\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '0::/\n', parallelism: 64 }), 2);
  });

  test('"max" means no quota: the CPUs the process may run on', () => {
    const root = cgroupFs({ 'cpu.max': 'max 100000\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '0::/\n', parallelism: 6 }), 6);
  });

  test('a fractional quota rounds up (1.5 CPUs → 2), and never exceeds the CPUs available', () => {
    const root = cgroupFs({ 'cpu.max': '150000 100000\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '0::/\n', parallelism: 8 }), 2);
    const big = cgroupFs({ 'cpu.max': '1600000 100000\n' });
    assert.equal(availableCpus({ cgroupRoot: big, procSelfCgroup: '0::/\n', parallelism: 4 }), 4);
  });

  test('a quota below one CPU still gives one worker', () => {
    const root = cgroupFs({ 'cpu.max': '20000 100000\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '0::/\n', parallelism: 8 }), 1);
  });

  test('the process cgroup is found from /proc/self/cgroup, and the tightest ancestor limit wins', () => {
    const root = cgroupFs({
      'cpu.max': 'max 100000\n',
      'kubepods/cpu.max': '300000 100000\n',
      'kubepods/pod1/cpu.max': 'max 100000\n',
      'kubepods/pod1/ctr/cpu.max': '500000 100000\n',
      'other/cpu.max': '100000 100000\n',
    });
    assert.equal(cgroupCpuLimit(root, '0::/kubepods/pod1/ctr\n'), 3);
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '0::/kubepods/pod1/ctr\n', parallelism: 16 }), 3);
  });
});

describe('cgroup v1', () => {
  test('cpu.cfs_quota_us / cpu.cfs_period_us under the cpu controller', () => {
    const root = cgroupFs({ 'cpu,cpuacct/cpu.cfs_quota_us': '250000\n', 'cpu,cpuacct/cpu.cfs_period_us': '100000\n' });
    const proc = '12:memory:/\n4:cpu,cpuacct:/\n1:name=systemd:/\n';
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: proc, parallelism: 32 }), 3);
  });

  test('a quota of -1 is no limit', () => {
    const root = cgroupFs({ 'cpu,cpuacct/cpu.cfs_quota_us': '-1\n', 'cpu,cpuacct/cpu.cfs_period_us': '100000\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '4:cpu,cpuacct:/\n', parallelism: 5 }), 5);
  });

  test('a container without a cgroup namespace: the host path is missing, the controller root holds the quota', () => {
    const root = cgroupFs({ 'cpu,cpuacct/cpu.cfs_quota_us': '100000\n', 'cpu,cpuacct/cpu.cfs_period_us': '100000\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '4:cpu,cpuacct:/docker/0123abcd\n', parallelism: 12 }), 1);
  });

  test('a hybrid system (a v2 line without the cpu controller) reads the v1 quota', () => {
    const root = cgroupFs({ 'cpu/cpu.cfs_quota_us': '400000\n', 'cpu/cpu.cfs_period_us': '100000\n', 'unified/cgroup.procs': '' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '5:cpu:/\n0::/\n', parallelism: 12 }), 4);
  });
});

describe('no cgroup information', () => {
  test('missing or unreadable files fall back to the CPUs available', () => {
    const root = cgroupFs({ 'cpu.max': 'garbage\n' });
    assert.equal(availableCpus({ cgroupRoot: root, procSelfCgroup: '0::/\n', parallelism: 3 }), 3);
    assert.equal(availableCpus({ cgroupRoot: join(root, 'absent'), procSelfCgroup: '', parallelism: 3 }), 3);
  });

  test('at least one CPU, even if the platform reports none', () => {
    assert.equal(availableCpus({ cgroupRoot: '/nonexistent', procSelfCgroup: '', parallelism: 0 }), 1);
  });

  test('on this machine: between 1 and os.availableParallelism()', () => {
    const n = availableCpus();
    assert.ok(Number.isInteger(n) && n >= 1 && n <= availableParallelism(), `availableCpus() = ${n}`);
  });
});

test('resolveWorkers: 0 means one per available CPU; any other value is kept', () => {
  const root = cgroupFs({ 'cpu.max': '200000 100000\n' });
  const sources = { cgroupRoot: root, procSelfCgroup: '0::/\n', parallelism: 64 };
  assert.equal(resolveWorkers(0, sources), 2);
  assert.equal(resolveWorkers(1, sources), 1);
  assert.equal(resolveWorkers(8, sources), 8);
});
