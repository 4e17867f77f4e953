// examples/prometheus/: the scrape config and the alert rules parse, the rules are the sample
// alerts of docs/operations.md, every metric they use is one of the metrics table (which
// readme-metrics.test.ts holds to /metrics), and the Kubernetes job finds the pods of
// examples/kubernetes/sluice.yaml by their label, namespace and port name.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';

const read = (path: string): string => readFileSync(fileURLToPath(new URL(`../../../${path}`, import.meta.url)), 'utf8');
const operations = read('docs/operations.md');
const rulesText = read('examples/prometheus/sluice-alerts.yml');
const scrape = parse(read('examples/prometheus/prometheus.yml')) as Record<string, any>;

/** The metrics of docs/operations.md's table. */
const METRICS = new Set([...operations.matchAll(/^\| `(sluice_\w+)` \| (\w+) \|/gm)].map((m) => m[1]!));

test('the alert rules are the sample alerts of docs/operations.md', () => {
  const start = operations.indexOf('```yaml\n', operations.indexOf('### Sample alerts'));
  assert.ok(start >= 0, 'docs/operations.md has its sample alerts');
  const sample = operations.slice(start + 8, operations.indexOf('```', start + 8));
  assert.deepEqual(parse(rulesText), parse(sample));
  const rules = (parse(rulesText) as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap((g) => g.rules);
  assert.ok(rules.length >= 5, `${rules.length} rules`);
  assert.equal(new Set(rules.map((r) => r.alert)).size, rules.length, 'alert names are unique');
});

test('every metric the examples use is one Sluice serves', () => {
  assert.ok(METRICS.size >= 10, 'the metrics table');
  for (const text of [rulesText, read('examples/prometheus/prometheus.yml')]) {
    for (const m of text.matchAll(/\bsluice_\w+/g)) {
      const name = m[0].replace(/_(bucket|sum|count)$/, '');
      assert.ok(METRICS.has(m[0]) || METRICS.has(name), `${m[0]} is a metric of docs/operations.md`);
    }
  }
});

test('the scrape config loads the rules and finds the example gateways', () => {
  assert.deepEqual(scrape['rule_files'], ['sluice-alerts.yml']);
  const jobs = scrape['scrape_configs'] as Record<string, any>[];
  for (const job of jobs) assert.equal(job['metrics_path'], '/metrics', job['job_name']);
  const kube = jobs.find((j) => j['kubernetes_sd_configs'] !== undefined)!;
  const manifests = parseAllDocuments(read('examples/kubernetes/sluice.yaml')).map((d) => d.toJS() as Record<string, any>);
  const deployment = manifests.find((d) => d['kind'] === 'Deployment')!;
  const pod = deployment['spec']['template'];
  const keep = (label: string): string => kube['relabel_configs'].find((r: Record<string, any>) => r['action'] === 'keep' && r['source_labels'][0] === label)['regex'];
  assert.equal(keep('__meta_kubernetes_pod_label_app_kubernetes_io_name'), pod['metadata']['labels']['app.kubernetes.io/name']);
  const ports = pod['spec']['containers'].flatMap((c: Record<string, any>) => c['ports'].map((p: { name: string }) => p.name));
  assert.ok(ports.includes(keep('__meta_kubernetes_pod_container_port_name')), `a container port named ${keep('__meta_kubernetes_pod_container_port_name')}`);
  assert.deepEqual(kube['kubernetes_sd_configs'][0]['namespaces']['names'], [deployment['metadata']['namespace']]);
  // No admin listener in the example: /metrics is on the relay port the job scrapes.
  const config = parse(manifests.find((d) => d['kind'] === 'ConfigMap')!['data']['config.yaml']) as Record<string, unknown>;
  assert.equal(config['admin'], undefined);
});
