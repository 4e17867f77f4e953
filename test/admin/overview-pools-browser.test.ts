// The overview page shows each pool in a real browser (Debian's chromium, driven by playwright-core):
// who holds which unit, and who waits, live. Without chromium (a developer machine) the test is
// skipped; with CI=true it must run.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Agent } from 'undici';
import { openBrowser, SKIP_WITHOUT_CHROMIUM } from '../helpers/browser.js';
import { startTestGateway } from '../helpers/gateway.js';
import { open, pooled, post, scratch } from '../helpers/pool.js';
import { eventually, within } from '../helpers/wait.js';

declare const document: any;

const agent = new Agent({ connections: 10 });
after(() => agent.close());

test('the overview page shows the pool: the unit a replica holds, and the service waiting for it', { skip: SKIP_WITHOUT_CHROMIUM }, async (t) => {
  const dir = scratch();
  const journal = join(dir, 'journal');
  const gate = join(dir, 'gate');
  const tg = await startTestGateway([pooled('a', 'gpu', journal), pooled('b', 'gpu', journal)], { pools: [{ name: 'gpu', size: 1 }], workers: 1, admin: { host: '127.0.0.1', port: 0 } });
  t.after(() => tg.close());
  const context = await openBrowser(t);
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));

  await page.goto(`http://127.0.0.1:${tg.gateway.adminPort}/`);
  await page.waitForSelector('#pools li[data-pool="gpu"]');
  const text = (): Promise<string> => page.locator('#pools li[data-pool="gpu"]').innerText();
  assert.equal(await text(), 'gpu · 1 of 1 unit free · 0 evictions\nunit 0: free');

  const held = post(tg, 'a', `/held?gate=${encodeURIComponent(gate)}`, agent);
  await page.waitForFunction(() => document.querySelector('#pools li[data-pool="gpu"]')?.textContent.includes('unit 0: a-1 (a)'), undefined, { timeout: 20_000 });
  const waiting = post(tg, 'b', '/echo', agent);
  await page.waitForFunction(() => document.querySelector('#pools li[data-pool="gpu"]')?.textContent.includes('waiting: b · 1 unit · priority 0'), undefined, { timeout: 20_000 });
  open(gate);
  await within(Promise.all([held, waiting]), 30_000, 'both answers');
  await page.waitForFunction(() => document.querySelector('#pools li[data-pool="gpu"]')?.textContent.includes('unit 0: b-1 (b)'), undefined, { timeout: 20_000 });
  await eventually(async () => (await text()).startsWith('gpu · 0 of 1 unit free · 1 eviction'), 20_000, 'the eviction on the page');
  assert.ok(!(await text()).includes('waiting'), 'nobody waits any more');
  assert.deepEqual(problems, []);
});
