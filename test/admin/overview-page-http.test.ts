// The overview page over HTTP, without a browser: its files (content types, ETag and 304, HEAD,
// a Content-Security-Policy that allows only its own files), the event stream's format, and
// nothing else served from the admin listener's page routes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { request } from 'undici';
import { UI_DIR } from '../../src/admin/page.js';
import { quantile } from '../../src/admin/status.js';
import { type OverviewFixture, startOverviewFixture } from '../helpers/overview.js';
import { eventually } from '../helpers/wait.js';

let fixture: OverviewFixture | undefined;
after(async () => {
  await fixture?.close();
});

async function admin(): Promise<OverviewFixture> {
  fixture ??= await startOverviewFixture();
  return fixture;
}

const FILES = [
  ['/', 'index.html', 'text/html; charset=utf-8'],
  ['/ui/app.js', 'app.js', 'text/javascript; charset=utf-8'],
  ['/ui/snippets.js', 'snippets.js', 'text/javascript; charset=utf-8'],
  ['/ui/routing-text.js', 'routing-text.js', 'text/javascript; charset=utf-8'],
  ['/ui/style.css', 'style.css', 'text/css; charset=utf-8'],
  ['/ui/favicon.svg', 'favicon.svg', 'image/svg+xml'],
] as const;

test('the page and its files: byte-identical to the package files, with content type, ETag, no-cache and a strict CSP', async () => {
  const f = await admin();
  for (const [path, file, type] of FILES) {
    const res = await request(`${f.admin}${path}`);
    const body = Buffer.from(await res.body.arrayBuffer());
    assert.equal(res.statusCode, 200, path);
    assert.equal(res.headers['content-type'], type, path);
    assert.ok(body.equals(readFileSync(`${UI_DIR}${file}`)), `${path} is ${file}`);
    assert.match(String(res.headers['etag']), /^"[A-Za-z0-9_-]{22}"$/);
    assert.equal(res.headers['cache-control'], 'no-cache');
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    const csp = String(res.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/, 'no inline or remote scripts');
    assert.match(csp, /connect-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);

    // The browser revalidates: the same ETag gets 304 without a body.
    const again = await request(`${f.admin}${path}`, { headers: { 'if-none-match': `"other", ${String(res.headers['etag'])}` } });
    assert.equal(again.statusCode, 304, path);
    assert.equal((await again.body.arrayBuffer()).byteLength, 0);
    assert.equal(again.headers['etag'], res.headers['etag']);

    const head = await request(`${f.admin}${path}`, { method: 'HEAD' });
    await head.body.dump();
    assert.equal(head.statusCode, 200);
    assert.equal(Number(head.headers['content-length']), body.length, `HEAD ${path} reports the length`);
  }
});

test('the page loads nothing from elsewhere: every script, style and image is one of its own files', async () => {
  const html = readFileSync(`${UI_DIR}index.html`, 'utf8');
  const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(refs.length >= 3);
  for (const ref of refs) assert.ok(['ui/app.js', 'ui/style.css', 'ui/favicon.svg', 'status', 'metrics'].includes(ref), `${ref} is local`);
  assert.doesNotMatch(html, /<script>|\sstyle="|\son[a-z]+="/, 'no inline script, style or handler (the CSP forbids them)');
  for (const file of ['app.js', 'snippets.js', 'routing-text.js']) {
    assert.doesNotMatch(readFileSync(`${UI_DIR}${file}`, 'utf8'), /https?:\/\/|innerHTML|eval\(|\bimport\(/, `${file}: no remote URL, no HTML injection`);
  }
});

test('other paths on the admin listener are 404, the operations endpoints stay', async () => {
  const f = await admin();
  for (const path of ['/ui/', '/ui/../package.json', '/ui/index.html', '/index.html', '/status/', '/src/admin/ui/app.js']) {
    const res = await request(`${f.admin}${path}`);
    await res.body.dump();
    assert.equal(res.statusCode, 404, path);
  }
  for (const path of ['/healthz', '/readyz', '/metrics']) {
    const res = await request(`${f.admin}${path}`);
    await res.body.dump();
    assert.equal(res.statusCode, 200, path);
  }
});

test('/status/events: the chart history first, then a status event with a chart point per service every second', async () => {
  const f = await admin();
  const controller = new AbortController();
  const res = await fetch(`${f.admin}/status/events`, { signal: controller.signal });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const reader = res.body!.getReader();
  let text = '';
  const events: Array<{ event: string; data: unknown }> = [];
  while (events.filter((e) => e.event === 'status').length < 2) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    let end: number;
    while ((end = text.indexOf('\n\n')) >= 0) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      const name = /^event: (.+)$/m.exec(block)?.[1];
      const data = /^data: (.+)$/m.exec(block)?.[1];
      if (name !== undefined && data !== undefined) events.push({ event: name, data: JSON.parse(data) });
    }
  }
  controller.abort();
  assert.equal(events[0]?.event, 'history');
  const history = events[0]!.data as { intervalMs: number; services: Record<string, unknown[]> };
  assert.equal(history.intervalMs, 1000);
  assert.deepEqual(Object.keys(history.services), ['api', 'llm']);
  const second = events.filter((e) => e.event === 'status')[1]!.data as {
    services: Array<{ slug: string }>;
    points: Record<string, { t: number; rps: number; queued: number; inflight: number; ttfbP50: number | null; ttfbP99: number | null; errors: number }>;
  };
  assert.deepEqual(
    second.services.map((s) => s.slug),
    ['api', 'llm'],
  );
  for (const slug of ['api', 'llm']) {
    const point = second.points[slug]!;
    assert.deepEqual(Object.keys(point).sort(), [
      'betweenEventsP50',
      'betweenEventsP99',
      'errors',
      'firstEventP50',
      'firstEventP99',
      'inflight',
      'queued',
      'rps',
      't',
      'ttfbP50',
      'ttfbP99',
    ]);
    assert.ok(point.t > 0);
  }
});

test('at most 64 open event streams: the next gets 503 with Retry-After until one closes', async () => {
  const f = await admin();
  const open: Array<{ abort: AbortController }> = [];
  const openStream = async (): Promise<number> => {
    const abort = new AbortController();
    const res = await request(`${f.admin}/status/events`, { signal: abort.signal });
    if (res.statusCode === 200) open.push({ abort });
    else await res.body.dump();
    return res.statusCode;
  };
  try {
    for (let i = 0; i < 64; i++) assert.equal(await openStream(), 200, `stream ${i + 1}`);
    const refused = await request(`${f.admin}/status/events`);
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.headers['retry-after'], '10');
    await refused.body.dump();
    open.pop()!.abort.abort();
    // The gateway notices the closed stream (uWS reports the abort), then a new page may stream.
    await eventually(async () => (await openStream()) === 200, 10_000, 'a new stream once the closed one is noticed');
  } finally {
    for (const s of open) s.abort.abort();
  }
});

test('quantiles from cumulative histogram buckets, as Prometheus histogram_quantile computes them', () => {
  const bounds = [0.1, 0.5, 1];
  // 10 observations: 4 ≤ 0.1, 4 in (0.1, 0.5], 1 in (0.5, 1], 1 above 1.
  const cumulative = [4, 8, 9, 10];
  assert.equal(quantile(0.4, bounds, cumulative), 0.1);
  assert.ok(Math.abs(quantile(0.6, bounds, cumulative)! - 0.3) < 1e-9, 'linear within (0.1, 0.5]');
  assert.ok(Math.abs(quantile(0.85, bounds, cumulative)! - 0.75) < 1e-9);
  assert.equal(quantile(0.99, bounds, cumulative), 1, 'in the +Inf bucket: the highest finite bound');
  assert.ok(Math.abs(quantile(0.2, bounds, cumulative)! - 0.05) < 1e-9, 'the first bucket starts at 0');
  assert.equal(quantile(0.5, bounds, [0, 0, 0, 0]), null, 'no observations');
});
