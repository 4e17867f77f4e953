// The overview page's Load and Unload buttons and a router's Request dialog, in a real browser
// (Debian's chromium, driven by playwright-core) against a real gateway with launched replicas
// (test/fixtures/pool-replica.ts, journaling their starts and exits). Without chromium (a
// developer machine) the test is skipped; with CI=true it must run.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { sha256Hex } from '../../src/cli/token.js';
import { openBrowser, SKIP_WITHOUT_CHROMIUM } from '../helpers/browser.js';
import { secret, startTestGateway, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { events, pooled, scratch } from '../helpers/pool.js';
import { eventually } from '../helpers/wait.js';

declare const document: any;

const ADMIN_TOKEN = secret('slc_admin_token_for_the_overview_browser_test_01234');

test('Load and Unload on the page: the token asked for once, the service loaded then unloaded; a router\'s Request dialog gives the OpenAI base URL and a model picker', { skip: SKIP_WITHOUT_CHROMIUM }, async (t) => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const tg = await startTestGateway([pooled('a', 'gpu', journal, {}, {}, { models: ['a-model'] })], {
    pools: [{ name: 'gpu', size: 1 }],
    workers: 1,
    admin: { host: '127.0.0.1', port: 0, tokens: [{ name: 'ops', sha256: sha256Hex(ADMIN_TOKEN) }] },
    routers: [{ slug: 'models', tokens: [{ name: 'ide', sha256: TEST_TOKEN_SHA256 }] }],
  });
  t.after(() => tg.close());
  const context = await openBrowser(t);
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));

  await page.goto(`http://127.0.0.1:${tg.gateway.adminPort}/`);
  const row = page.locator('tbody[data-slug="a"]');
  await row.waitFor();
  const state = (): Promise<string> => row.locator('.state').innerText();
  assert.equal(await state(), 'cold');
  const load = row.locator('button[data-action="load"]');
  const unload = row.locator('button[data-action="unload"]');
  assert.equal(await load.isVisible(), true);
  assert.equal(await unload.isVisible(), true);

  await load.click();
  await page.locator('#admin-dialog').waitFor({ state: 'visible' });
  await page.fill('#admin-token', ADMIN_TOKEN);
  await page.click('#admin-ok');
  await page.waitForFunction(() => document.querySelector('tbody[data-slug="a"] .state')?.textContent === 'ready', undefined, { timeout: 20_000 });
  assert.equal(await row.locator('.action-status').innerText(), 'loading…');
  assert.deepEqual(events(journal), ['start a']);
  assert.equal(tg.logs.filter((l) => l.msg === 'service load asked').length, 1);

  await unload.click(); // the token is remembered: no dialog
  await page.waitForFunction(() => document.querySelector('tbody[data-slug="a"] .action-status')?.textContent === 'stopped a-1', undefined, { timeout: 20_000 });
  assert.equal(await page.locator('#admin-dialog').isVisible(), false);
  await eventually(() => events(journal).length === 2, 20_000, 'a to exit');
  await page.waitForFunction(() => document.querySelector('tbody[data-slug="a"] .state')?.textContent === 'cold', undefined, { timeout: 20_000 });

  await page.locator('#routers li[data-router="models"] button').click();
  const dialog = page.locator('#request-dialog');
  await dialog.waitFor({ state: 'visible' });
  assert.equal(await dialog.locator('#dialog-title').innerText(), 'Request models');
  assert.equal(await page.locator('#dialog-base-url').innerText(), `${tg.origin}/api/v1/services/models/request/v1`);
  assert.deepEqual(await page.locator('#model-pick option').evaluateAll((options: { value: string }[]) => options.map((o) => o.value)), ['a-model']);
  assert.equal(await page.locator('#model-name').isVisible(), false, 'the free model field is for services');
  assert.equal(await page.locator('input[name="shape"][value="kserve"]').isVisible(), false, 'OpenAI paths only');
  const snippet = await page.locator('#snippet').innerText();
  assert.ok(snippet.includes(`${tg.origin}/api/v1/services/models/request/v1/chat/completions`), snippet);
  assert.ok(snippet.includes('"model":"a-model"'), snippet);
  await page.keyboard.press('Escape');

  await row.locator('.request-button').click();
  await dialog.waitFor({ state: 'visible' });
  assert.equal(await page.locator('#dialog-base-url').innerText(), `${tg.origin}/api/v1/services/a`, 'a service keeps its own base URL');
  assert.equal(await page.locator('#model-name').isVisible(), true);
  assert.deepEqual(problems, []);
});
