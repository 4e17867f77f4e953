// The metrics table of docs/operations.md (section "Metrics") names exactly the metrics /metrics
// serves, with their types and labels; its sample alert rules use only metrics that exist.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AUTH, rawService, startTestGateway } from '../helpers/gateway.js';

const operations = readFileSync(fileURLToPath(new URL('../../../docs/operations.md', import.meta.url)), 'utf8');
const metricsStart = operations.indexOf('\n## Metrics\n');
const metricsEnd = operations.indexOf('\n## ', metricsStart + 1);
/** The section "Metrics" of docs/operations.md: the table and the sample alerts. */
const operating = operations.slice(metricsStart, metricsEnd < 0 ? undefined : metricsEnd);

test('the metrics table of docs/operations.md matches /metrics: names, types and labels', async (t) => {
  assert.ok(metricsStart >= 0, 'docs/operations.md has a section "## Metrics"');
  const tg = await startTestGateway(rawService({ urls: ['http://127.0.0.1:9'] }));
  t.after(() => tg.close());
  // One request (its replica refuses: 502), so labelled samples exist.
  const res = await fetch(tg.url('/x'), { method: 'POST', headers: AUTH, body: 'x' });
  assert.equal(res.status, 502);
  await res.text();
  const text = await (await fetch(`${tg.origin}/metrics`)).text();
  const served = new Map<string, string>();
  for (const m of text.matchAll(/^# TYPE (sluice_\w+) (\w+)$/gm)) served.set(m[1]!, m[2]!);
  assert.ok(served.size >= 5, text);
  assert.match(text, /^sluice_requests_total\{service="svc",status="502",outcome="upstream_unavailable"\} 1$/m);

  const documented = new Map<string, { type: string; labels: string }>();
  for (const m of operating.matchAll(/^\| `(sluice_\w+)` \| (\w+) \| ([^|]*) \|/gm)) documented.set(m[1]!, { type: m[2]!, labels: m[3]! });
  assert.deepEqual([...documented.keys()].sort(), [...served.keys()].sort(), 'the same metrics');
  for (const [name, type] of served) assert.equal(documented.get(name)!.type, type, `${name} type`);

  // Labels: each label of a sample appears in the table's labels cell.
  for (const m of text.matchAll(/^(sluice_\w+?)(?:_bucket|_sum|_count)?\{([^}]*)\}/gm)) {
    const base = served.has(m[1]!) ? m[1]! : m[1]!.replace(/_(bucket|sum|count)$/, '');
    const cell = documented.get(base)?.labels ?? '';
    for (const label of m[2]!.split(',').map((p) => p.split('=')[0]!)) {
      if (label === 'le') continue;
      assert.ok(cell.includes(`\`${label}\``), `${base}: label ${label} is documented`);
    }
  }

  const alertMetrics = [...operating.matchAll(/expr:[^\n]*(?:\n {12,}[^\n]*)*/g)].flatMap((m) => [...m[0].matchAll(/(sluice_\w+)/g)].map((x) => x[1]!));
  assert.ok(alertMetrics.length >= 2, 'sample alert rules');
  for (const name of alertMetrics) {
    const base = name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(served.has(name) || served.get(base) === 'histogram', `alert uses ${name}, which /metrics serves`);
  }
});
