// The source layout's rules, held against every import of src/ (docs/architecture.md#the-source-layout,
// the table in test/helpers/layers.ts): the control plane never imports the data plane or the relay
// and they never import it (they meet through the thread protocol and shared memory), the shared
// folders import neither plane, only the composition root (src/gateway/) and the command line build
// both, no import runs up the layers, a kind of replicas is entered only through the table of kinds,
// and no imports go round in a circle.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { brokenRule, cycles, type Import, importsOf, placeOf, sourceFiles } from '../helpers/layers.js';

const files = sourceFiles();
const imports = files.flatMap((file) => importsOf(file));

test('the layout is read: every file of src/ has a place, and the imports were found', () => {
  assert.ok(files.length > 100 && imports.length > 400, `${files.length} files, ${imports.length} imports`);
  assert.deepEqual(files.filter((f) => placeOf(f) === undefined), []);
  // The rules see every form of import: a type-only one, a re-export, a dynamic import().
  assert.ok(imports.some((i) => i.from === 'gateway/gateway.ts' && i.to === 'limits/store/limit-store.ts'), 'a dynamic import()');
  assert.ok(imports.some((i) => i.from === 'control/service/kind-policy.ts' && i.to === 'control/sources/source.ts'), 'an import type');
});

test('no import breaks the planes, runs up the layers or enters a concern from outside', () => {
  const broken = imports.flatMap((i) => {
    const why = brokenRule(i);
    return why === undefined ? [] : [`${i.from} -> ${i.to}: ${why}`];
  });
  assert.deepEqual(broken, []);
});

test('no imports go round in a circle', () => {
  assert.deepEqual(cycles(imports), []);
});

test('the rules refuse what they must (each a made-up import)', () => {
  const refused = (from: string, to: string): string | undefined => brokenRule({ from, to } satisfies Import);
  assert.equal(refused('control/service/service-control.ts', 'data/replica-view.ts'), 'the control plane imports the data plane');
  assert.equal(refused('control/service/load-fetch.ts', 'upstream/pool.ts'), 'the control plane imports the data plane');
  assert.equal(refused('control/service/demand.ts', 'relay/relay.ts'), 'the control plane imports the data plane');
  assert.equal(refused('relay/relay.ts', 'control/service/demand.ts'), 'the data plane imports a main-thread-only folder');
  assert.equal(refused('data/data-plane.ts', 'limits/store/limit-store.ts'), 'the data plane imports a main-thread-only folder');
  assert.equal(refused('relay/request/auth.ts', 'admin/status.ts'), 'the data plane imports a main-thread-only folder');
  assert.equal(refused('replicas/slots.ts', 'upstream/pool.ts'), 'a shared folder imports a data-plane folder');
  assert.equal(refused('limits/limit-table.ts', 'limits/store/store-cells.ts'), 'a shared folder imports a main-plane folder');
  assert.equal(refused('threads/messages.ts', 'gateway/gateway.ts'), 'a shared folder imports a composition folder');
  assert.equal(refused('control/service/demand.ts', 'gateway/worker-pool.ts'), 'imports the composition root');
  assert.equal(refused('http/syntax.ts', 'config/rules.ts'), 'imports up the layers');
  assert.equal(refused('upstream/pool.ts', 'relay/relay.ts'), 'imports up the layers');
  assert.equal(refused('metrics/metrics.ts', 'limits/limit-table.ts'), 'imports a sibling on its own layer');
  assert.equal(refused('control/service/kind-policy.ts', 'control/kinds/kubernetes/kubernetes-source.ts'), 'enters control/kinds/kubernetes/ from outside control/kinds/kinds.ts, gateway/, cli/');
  assert.equal(refused('control/service/health.ts', 'control/sources/probe.ts'), undefined);
  assert.deepEqual(cycles([{ from: 'a.ts', to: 'b.ts' }, { from: 'b.ts', to: 'c.ts' }, { from: 'c.ts', to: 'a.ts' }, { from: 'c.ts', to: 'd.ts' }]), [['a.ts', 'b.ts', 'c.ts']]);
});
