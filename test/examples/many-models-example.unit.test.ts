// examples/many-models/sluice.yaml, the worked example of docs/many-models.md: it is a valid config
// (what `sluice check` reads), three models behind one router on a pool of two units, each launched
// replica told its unit through CUDA_VISIBLE_DEVICES, and the page's models are the file's.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfigFile } from '../../src/config/load.js';

const path = (p: string): string => fileURLToPath(new URL(`../../../${p}`, import.meta.url));

test('the many-models example: three models behind one router on two units, valid as it is', () => {
  const config = loadConfigFile(path('examples/many-models/sluice.yaml'), {});
  assert.deepEqual(config.pools.map((p) => [p.name, p.size]), [['gpu', 2]]);
  const router = config.routers?.[0];
  assert.ok(router !== undefined, 'a router');
  const models = config.services.flatMap((s) => s.models ?? []);
  assert.equal(models.length, 3);
  for (const s of config.services) {
    assert.ok(s.replicas.command !== undefined, `${s.slug} launches its replicas`);
    assert.equal(s.replicas.pool, 'gpu', s.slug);
    assert.equal(s.replicas.env.CUDA_VISIBLE_DEVICES, '{units}', s.slug);
  }
});

test('docs/many-models.md shows the example: its file named, its models those of the file', () => {
  const page = readFileSync(path('docs/many-models.md'), 'utf8');
  assert.match(page, /examples\/many-models\/sluice\.yaml/);
  const config = loadConfigFile(path('examples/many-models/sluice.yaml'), {});
  const models = new Set(config.services.flatMap((s) => s.models ?? []));
  const shown = [...page.matchAll(/models: \["([^"]+)"\]|model="([^"]+)"/g)].map((m) => m[1] ?? m[2]!);
  assert.ok(shown.length >= 2, 'the page shows models');
  for (const model of shown) assert.ok(models.has(model), `${model} is a model of the example`);
});
