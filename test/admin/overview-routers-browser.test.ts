// The overview page shows each router in a real browser (Debian's chromium, driven by
// playwright-core): its models, each with its service and state, live as a routed request starts
// a cold service, and its limited token's use. Without chromium (a developer machine) the test is
// skipped; with CI=true it must run.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { openBrowser, SKIP_WITHOUT_CHROMIUM } from '../helpers/browser.js';
import { secret, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { GATED_MODEL_SERVER } from '../helpers/overview.js';
import { readBody, startReplica } from '../helpers/replica.js';
import { within } from '../helpers/wait.js';

const ROUTER_TOKEN = secret('slc_router_token_for_the_overview_browser_test_0123');

declare const document: any;

test('the overview page shows the router: its models and their state, cold → starting → ready, and its limited token', { skip: SKIP_WITHOUT_CHROMIUM }, async (t) => {
  const replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.end('{}');
  });
  t.after(() => replica.close());
  const gate = join(mkdtempSync(join(tmpdir(), 'sluice-gate-')), 'open');
  const tg = await startTestGateway(
    [
      { slug: 'api', tokens: [{ name: 'api-caller', sha256: TEST_TOKEN_SHA256 }], models: ['api-model'], replicas: { urls: [replica.url] } },
      {
        slug: 'llm',
        tokens: [{ name: 'llm-caller', sha256: TEST_TOKEN_SHA256 }],
        models: ['demo'],
        replicas: { command: [process.execPath, GATED_MODEL_SERVER], env: { GATE_FILE: gate, TOKEN_DELAY_MS: '5' }, readyPath: '/health', max: 1 },
      },
    ] as never,
    { routers: [{ slug: 'models', tokens: [{ name: 'ide', sha256: sha256Hex(ROUTER_TOKEN), limits: { concurrent: 4 } }] }], workers: 1, admin: { host: '127.0.0.1', port: 0 } },
  );
  t.after(async () => {
    writeFileSync(gate, 'open');
    await tg.close();
  });
  const context = await openBrowser(t);
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));

  await page.goto(`http://127.0.0.1:${tg.gateway.adminPort}/`);
  await page.waitForSelector('#routers li[data-router="models"]');
  assert.equal(await page.locator('#routers').isVisible(), true);
  const text = (): Promise<string> => page.locator('#routers li[data-router="models"] .router-text').innerText();
  const base = `${tg.origin}/api/v1/services/models`;
  assert.equal(await text(), [`models · 1 of 2 models ready · ${base}/request/v1`, 'api-model: api · ready', 'demo: llm · cold', 'ide: 0 of 4 in flight'].join('\n'));

  const asked = fetch(`${base}/request/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ROUTER_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo', messages: [{ role: 'user', content: 'hi' }] }),
  });
  const has = (line: string): Promise<unknown> =>
    page.waitForFunction((l: string) => document.querySelector('#routers li[data-router="models"] .router-text')?.innerText.split('\n').includes(l), line, { timeout: 20_000 });
  await has('demo: llm · starting');
  await has('ide: 1 of 4 in flight');
  writeFileSync(gate, 'open');
  const answer = await within(asked, 30_000, 'the routed answer');
  assert.equal(answer.status, 200);
  await answer.body?.cancel();
  await has('demo: llm · ready');
  await has('ide: 0 of 4 in flight');
  assert.ok((await text()).startsWith(`models · 2 of 2 models ready · ${base}/request/v1`));
  assert.deepEqual(problems, []);
});
