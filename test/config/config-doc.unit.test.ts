// The config table of docs/configuration.md is generated from the schema (src/config/doc.ts): it
// must equal what the generator prints now, every key must say what it does and carry a rule, and
// each default it shows must be the value the loader fills in.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/config/load.js';
import { ABOUT, configKeys, configTable, TABLE_BEGIN, TABLE_END, TABLE_FILE, withTable } from '../../src/config/doc.js';

const DOC = fileURLToPath(new URL(`../../../${TABLE_FILE}`, import.meta.url));

test("the config table of docs/configuration.md is the one generated from the schema", () => {
  assert.equal(TABLE_FILE, 'docs/configuration.md');
  assert.ok(TABLE_BEGIN.includes(`--write ${TABLE_FILE}`), 'the marker names the file it is in');
  const text = readFileSync(DOC, 'utf8');
  const begin = text.indexOf(TABLE_BEGIN);
  const end = text.indexOf(TABLE_END);
  assert.ok(begin >= 0 && end > begin, `${TABLE_FILE} has the table markers`);
  assert.equal(text.indexOf(TABLE_BEGIN, begin + 1), -1, 'one table');
  const inDoc = text.slice(begin + TABLE_BEGIN.length, end).trim();
  assert.equal(inDoc, configTable(), `regenerate it: npm run build && node dist/src/config/doc.js --write ${TABLE_FILE}`);
  assert.equal(withTable(text), text);
});

test('every key says what it does and has a rule; no description is left for a key that is gone', () => {
  const keys = configKeys().map((k) => k.key);
  assert.equal(new Set(keys).size, keys.length, 'each key once');
  for (const doc of configKeys()) {
    assert.ok(ABOUT[doc.key], `ABOUT has no entry for ${doc.key}`);
    assert.match(doc.rule, /^must /, `${doc.key} has a rule`);
  }
  assert.deepEqual(Object.keys(ABOUT).filter((k) => !keys.includes(k)), [], 'ABOUT entries for keys the schema does not have');
  for (const key of ['listen.tls.certFile', 'workers', 'services[].replicas.concurrency', 'admin.port']) assert.ok(keys.includes(key), key);
});

test('each default in the table is the value the loader fills in', () => {
  const digest = 'ab'.repeat(32);
  const config = parseConfig({
    admin: { port: 9091 },
    // `replicas.load` is an optional section: set (by its preset alone) so its defaults are filled in.
    // `routing.prefix` likewise: `true` fills in its tunables' defaults.
    services: [{ slug: 's', tokens: [{ name: 't', sha256: digest }], replicas: { command: ['node', 'x.js'], load: { preset: 'vllm' } }, routing: { prefix: true }, models: ['m'] }],
    // `routers` is optional: one is set so its tokens' defaults are filled in.
    routers: [{ slug: 'r', tokens: [{ name: 't', sha256: digest }] }],
  }) as unknown as Record<string, unknown>;
  let checked = 0;
  for (const doc of configKeys()) {
    if (doc.default === undefined) continue;
    let value: unknown = config;
    for (const part of doc.key.split('.')) {
      const name = part.replace(/\[\]$/, '');
      value = (value as Record<string, unknown>)[name];
      if (part.endsWith('[]')) value = (value as unknown[])[0];
    }
    assert.deepEqual(value, doc.default.value, `${doc.key}: the table says ${JSON.stringify(doc.default.value)}, the loader gives ${JSON.stringify(value)}`);
    checked++;
  }
  assert.ok(checked >= 20, `checked ${checked} defaults`);
  const required = configKeys().filter((k) => k.required).map((k) => k.key);
  assert.deepEqual(required, [
    'listen.tls.certFile',
    'listen.tls.keyFile',
    'admin.port',
    'admin.tokens[].name',
    'admin.tokens[].sha256',
    'pools[].name',
    'pools[].size',
    'services',
    'services[].slug',
    'services[].tokens[].name',
    'services[].tokens[].sha256',
    'services[].replicas.kubernetes.deployment',
    'services[].replicas.kubernetes.service',
    'services[].replicas.kubernetes.port',
    'routers[].slug',
    'routers[].tokens',
    'routers[].tokens[].name',
    'routers[].tokens[].sha256',
  ]);
});
