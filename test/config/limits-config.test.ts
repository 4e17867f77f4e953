// The config of limits per caller (docs/configuration.md#limits-per-caller): every problem named by
// key and rule, and `limits.store` refused by `sluice check` (and so by the start) until the redis
// store exists.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/config/load.js';
import { problemsOf } from '../helpers/config.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
const DIGEST = 'ab'.repeat(32);

function config(limits: unknown, top?: unknown): Record<string, unknown> {
  return {
    ...(top === undefined ? {} : { limits: top }),
    services: [{ slug: 'demo', tokens: [{ name: 'laptop', sha256: DIGEST, limits }], limits, replicas: { urls: ['http://127.0.0.1:9000'] } }],
  };
}

function rules(raw: unknown): Map<string, string> {
  return new Map(problemsOf(raw).map((p) => [p.key, p.rule]));
}

test('limits: every key optional, each an integer in its range; unknown keys named', () => {
  const ok = parseConfig(config({ requestsPerMinute: 60, concurrent: 4, tokensPerMinute: 100_000 }));
  assert.deepEqual(ok.services[0]!.tokens[0]!.limits, { requestsPerMinute: 60, concurrent: 4, tokensPerMinute: 100_000 });
  assert.deepEqual(parseConfig(config({})).services[0]!.limits, {});
  assert.deepEqual(ok.limits, { prefix: 'sluice:', onStoreDown: 'allow' });

  const bad = rules(config({ requestsPerMinute: 0, concurrent: 1.5, tokensPerMinute: '100', perHour: 3 }));
  assert.match(bad.get('services[0].tokens[0].limits.requestsPerMinute')!, /^must be an integer from 1 to 1000000/);
  assert.match(bad.get('services[0].tokens[0].limits.concurrent')!, /^must be an integer from 1 to 1000000/);
  assert.match(bad.get('services[0].tokens[0].limits.tokensPerMinute')!, /^must be an integer from 1 to 1000000000/);
  assert.match(bad.get('services[0].tokens[0].limits.perHour')!, /^unknown key/);
  assert.match(bad.get('services[0].limits.requestsPerMinute')!, /^must be an integer/);
  assert.match(rules(config(5)).get('services[0].limits')!, /^must be an object with any of requestsPerMinute, concurrent, tokensPerMinute/);
});

test('top-level limits: store must be a redis URL, prefix visible ASCII, onStoreDown allow or refuse', () => {
  const bad = rules(config(undefined, { store: 'http://x:1', prefix: '', onStoreDown: 'maybe' }));
  assert.match(bad.get('limits.store')!, /^must be redis:\/\/host:port or redis:\/\/host:port\/db/);
  assert.match(bad.get('limits.prefix')!, /^must be 1 to 64 visible ASCII characters/);
  assert.equal(bad.get('limits.onStoreDown'), 'must be allow or refuse');
  assert.match(rules(config(undefined, { store: 'redis://cache:0' })).get('limits.store')!, /^must be redis:/);
  assert.deepEqual(parseConfig(config(undefined, { prefix: 'gw1:', onStoreDown: 'refuse' })).limits, { prefix: 'gw1:', onStoreDown: 'refuse' });
});

test('a redis store is accepted: host:port with an optional db', () => {
  assert.deepEqual(parseConfig(config(undefined, { store: 'redis://cache:6379/2' })).limits, { store: 'redis://cache:6379/2', prefix: 'sluice:', onStoreDown: 'allow' });
  assert.equal(parseConfig(config(undefined, { store: 'redis://10.0.0.7:6380' })).limits.store, 'redis://10.0.0.7:6380');
  for (const url of ['redis://cache', 'redis://cache:6379/x', 'redis://cache:70000', 'redis://cache:6379/2?x=1', 'rediss://cache:6379', 'redis://user:pw@cache:6379', 'redis://cache:6379/']) {
    assert.match(rules(config(undefined, { store: url })).get('limits.store') ?? 'accepted', /^must be redis:\/\/host:port or redis:\/\/host:port\/db/, url);
  }
});

async function check(file: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'check', '--config', file], (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : Number((err as { code?: number }).code), out: stdout + stderr });
    });
  });
}

test('sluice check: a redis store passes; a malformed one fails with its key and rule, exit 1', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-limits-'));
  try {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'redis://127.0.0.1:6379/1' })));
    const good = await check(file);
    assert.equal(good.code, 0, good.out);
    writeFileSync(file, JSON.stringify(config({ requestsPerMinute: 10 }, { store: 'redis://127.0.0.1' })));
    const bad = await check(file);
    assert.equal(bad.code, 1);
    assert.match(bad.out, /limits\.store/);
    assert.match(bad.out, /must be redis:\/\/host:port or redis:\/\/host:port\/db \(db an integer from 0 to 65535\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
