// The config of pools (docs/configuration.md#pools): `pools: [{ name, size }]`, `replicas.pool` and
// `replicas.units`, every problem named by key and rule.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { problemsOf } from '../helpers/config.js';

const DIGEST = 'ab'.repeat(32);

function service(slug: string, replicas: Record<string, unknown>): Record<string, unknown> {
  return { slug, tokens: [{ name: 'laptop', sha256: DIGEST }], replicas };
}

function rules(raw: unknown): Map<string, string> {
  return new Map(problemsOf(raw).map((p) => [p.key, p.rule]));
}

const launched = (extra: Record<string, unknown> = {}) => ({ command: ['vllm', 'serve', 'm', '--port', '{port}'], env: { CUDA_VISIBLE_DEVICES: '{units}' }, ...extra });

test('pools: a list of { name, size }; replicas.pool names one, replicas.units defaults to 1', () => {
  const ok = parseConfig({ pools: [{ name: 'gpu', size: 2 }], services: [service('chat', launched({ pool: 'gpu' })), service('coder', launched({ pool: 'gpu', units: 2, max: 3 }))] });
  assert.deepEqual(ok.pools, [{ name: 'gpu', size: 2 }]);
  assert.equal(ok.services[0]!.replicas.pool, 'gpu');
  assert.equal(ok.services[0]!.replicas.units, 1);
  assert.equal(ok.services[1]!.replicas.units, 2, 'max × units may exceed the pool: replicas share it');
  const plain = parseConfig({ services: [service('x', { urls: ['http://127.0.0.1:9000'] })] });
  assert.deepEqual(plain.pools, []);
  assert.equal(plain.services[0]!.replicas.units, 1);
  assert.equal(plain.services[0]!.replicas.pool, undefined);
});

test('pools: names unique and slug-like, sizes integers from 1', () => {
  const bad = rules({ pools: [{ name: 'gpu', size: 0 }, { name: 'tpu', size: 1.5 }, { name: 'GPU!', size: 2 }, { size: 1 }], services: [service('x', { urls: ['http://127.0.0.1:9000'] })] });
  assert.match(bad.get('pools[0].size')!, /^must be an integer from 1 to 1024/);
  assert.match(bad.get('pools[1].size')!, /^must be an integer from 1 to 1024/);
  assert.match(bad.get('pools[2].name')!, /^must be 1 to 63 lower-case letters/);
  const twice = rules({ pools: [{ name: 'gpu', size: 1 }, { name: 'gpu', size: 2 }], services: [service('x', { urls: ['http://127.0.0.1:9000'] })] });
  assert.equal(twice.get('pools[1].name'), 'must be unique (also pools[0].name)');
  assert.match(bad.get('pools[3].name')!, /^is required/);
  assert.match(rules({ pools: { gpu: 2 }, services: [service('x', { urls: ['http://127.0.0.1:9000'] })] }).get('pools')!, /^must be a list of \{ name, size \}/);
});

test('replicas.pool: an existing pool, for launched replicas only; units at most its size', () => {
  const pools = [{ name: 'gpu', size: 2 }];
  const bad = rules({
    pools,
    services: [
      service('a', launched({ pool: 'tpu' })),
      service('b', { urls: ['http://127.0.0.1:9000'], pool: 'gpu' }),
      service('c', { kubernetes: { deployment: 'd', service: 's', port: 80 }, pool: 'gpu' }),
      service('d', launched({ pool: 'gpu', units: 3 })),
      service('e', launched({ units: 2 })),
      service('f', { command: ['run', '--gpus={units}'] }),
      service('g', launched({ pool: 'gpu', units: 0 })),
    ],
  });
  assert.equal(bad.get('services[0].replicas.pool'), 'must be the name of a pool in pools (pools: gpu)');
  assert.match(bad.get('services[1].replicas.pool')!, /^applies only to launched replicas \(replicas\.command\)/);
  assert.match(bad.get('services[2].replicas.pool')!, /Kubernetes schedules its own GPUs/);
  assert.equal(bad.get('services[3].replicas.units'), 'must be at most the size of pool gpu (2)');
  assert.match(bad.get('services[4].replicas.units')!, /^applies only with replicas\.pool/);
  assert.match(bad.get('services[5].replicas.command')!, /uses \{units\}, which is replaced only for a service with replicas\.pool/);
  assert.match(bad.get('services[6].replicas.units')!, /^must be an integer from 1 to 1024/);
  assert.equal(rules({ services: [service('a', launched({ pool: 'gpu' }))] }).get('services[0].replicas.pool'), 'must be the name of a pool in pools (there is no pools list)');
  // {units} in env without a pool: env is named.
  assert.match(rules({ services: [service('a', { command: ['run'], env: { CUDA_VISIBLE_DEVICES: '{units}' } })] }).get('services[0].replicas.env')!, /uses \{units\}/);
});

test('replicas.min on a pool: what min keeps must fit, since those replicas are never stopped for another service', () => {
  const bad = rules({ pools: [{ name: 'gpu', size: 2 }], services: [service('a', launched({ pool: 'gpu', min: 1 })), service('b', launched({ pool: 'gpu', min: 1, units: 2 }))] });
  assert.match(bad.get('services[1].replicas.min')!, /^must leave room in pool gpu: replicas\.min × replicas\.units of a, b add up to 3, more than its size \(2\)/);
  parseConfig({ pools: [{ name: 'gpu', size: 2 }], services: [service('a', launched({ pool: 'gpu', min: 1 })), service('b', launched({ pool: 'gpu', min: 1 }))] });
});
