// The service overview page in a real browser (Debian's chromium, driven by playwright-core):
// it loads with no console errors, lists the services, shows a cold start live (and the token
// latencies of the streams that waited through it), is usable with the keyboard and on a phone,
// and its Request dialog's examples work when run: the curl lines with a real token filled in by
// the test (run by bash), the JavaScript ones by node.
// Screenshots go to .test-output/ (not committed).
//
// Without chromium (a developer machine) the test is skipped; with CI=true it must run.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { request } from 'undici';
import { AUTH, TEST_TOKEN, TEST_TOKEN_SHA256 } from '../helpers/gateway.js';
import { type OverviewFixture, startOverviewFixture } from '../helpers/overview.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const IN_CI = process.env['CI'] === 'true' || process.env['CI'] === '1';
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const SKIP = !HAVE_CHROMIUM && !IN_CI ? `no chromium at ${CHROMIUM}: run .ci/install-chromium (Debian) or set CHROMIUM_PATH` : false;

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const OUTPUT = join(ROOT, '.test-output');
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const run = promisify(execFile);

// The browser globals that the page functions below use: they run in chromium, not in node, and
// the project compiles without the DOM library.
declare const document: any;
declare const window: any;
declare const navigator: any;
declare const localStorage: any;
declare const sessionStorage: any;
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

/** The text of a cell of a service's row. */
function cell(page: Page, slug: string, field: string): Promise<string> {
  return page.locator(`tbody.service[data-slug="${slug}"] [data-field="${field}"]`).first().innerText();
}

/** Waits until a service's cell shows `text` (the page updates itself once a second). */
async function waitForCell(page: Page, slug: string, field: string, text: string): Promise<void> {
  await page.waitForFunction(
    ([selector, expected]) => document.querySelector(selector)?.textContent === expected,
    [`tbody.service[data-slug="${slug}"] [data-field="${field}"]`, text] as const,
    { timeout: 20_000 },
  );
}

/** Runs a shell command line the way a user pasting it would, and collects its output chunk by chunk. */
function runShell(line: string): Promise<{ code: number | null; chunks: string[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env['SLUICE_TOKEN'];
    const child = spawn('bash', ['-c', line], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: string[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => chunks.push(d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, chunks, stderr }));
  });
}

/** '' when python3 parses `code`, its error otherwise, undefined without python3. */
function pythonParses(code: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.on('error', () => resolve(undefined));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (exit) => resolve(exit === 0 ? '' : err || `exit ${exit}`));
    child.stdin.on('error', () => {});
    child.stdin.end(code);
  });
}

async function snippetText(page: Page): Promise<string> {
  return page.locator('#snippet').innerText();
}

async function choose(page: Page, name: string, value: string): Promise<void> {
  await page.locator(`input[name="${name}"][value="${value}"]`).check();
}

test('the overview page: services live, a cold start as it happens, and a Request dialog whose examples work', { skip: SKIP }, async () => {
  assert.ok(HAVE_CHROMIUM, `CI=true and no chromium at ${CHROMIUM}: .ci/install-chromium should have installed it`);
  mkdirSync(OUTPUT, { recursive: true });
  const f: OverviewFixture = await startOverviewFixture();
  cleanups.push(() => f.close());

  const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
  cleanups.push(async () => rmSync(profile, { recursive: true, force: true }));
  const context: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1366, height: 768 },
  });
  cleanups.push(() => context.close());
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: f.admin });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('response', (res) => {
    if (res.status() >= 400) problems.push(`${res.status()} ${res.url()}`);
  });

  // ── the page lists the services ──────────────────────────────────────────────────────────
  await page.goto(`${f.admin}/`);
  await page.waitForSelector('tbody.service[data-slug="llm"]');
  assert.equal(await page.title(), 'Sluice · services');
  assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('tbody.service')].map((row: { dataset: { slug: string } }) => row.dataset.slug)), ['api', 'llm']);
  assert.equal(await cell(page, 'api', 'baseUrl'), `${f.tg.origin}/api/v1/services/api`);
  assert.equal(await cell(page, 'api', 'kind'), 'static');
  assert.equal(await cell(page, 'api', 'state'), 'ready');
  assert.equal(await cell(page, 'llm', 'kind'), 'launched');
  assert.equal(await cell(page, 'llm', 'state'), 'cold');
  assert.equal(await cell(page, 'llm', 'replicas'), 'none');
  assert.equal(await cell(page, 'api', 'routing'), 'fewest in flight');
  await waitForCell(page, 'llm', 'state', 'cold');
  assert.equal(await page.locator('#connection').getAttribute('data-state'), 'live');
  await page.screenshot({ path: join(OUTPUT, 'overview-cold.png'), fullPage: true });

  // ── a cold start, live: starting with a queue, then ready and the queue drained ─────────────
  const chat = (content: string): Promise<string> =>
    request(f.tg.url('/v1/chat/completions', 'llm'), {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo', stream: true, messages: [{ role: 'user', content }] }),
    }).then(
      (res) => res.body.text(),
      (err: unknown) => `request failed: ${String(err)}`,
    );
  const queued = [chat('one'), chat('two'), chat('three')];
  await waitForCell(page, 'llm', 'state', 'starting');
  await waitForCell(page, 'llm', 'queued', '3');
  assert.equal(await cell(page, 'llm', 'replicas'), '1 starting');
  assert.equal((await page.locator('tbody.service[data-slug="llm"] [data-field="replicas"]').getAttribute('title')) ?? '', '', 'no expected start before one was measured');
  assert.equal(await page.locator('#announcer').innerText(), 'llm is starting', 'the change is announced to screen readers');
  await page.screenshot({ path: join(OUTPUT, 'overview-starting.png'), fullPage: true });
  f.openGate();
  await waitForCell(page, 'llm', 'state', 'ready');
  await waitForCell(page, 'llm', 'queued', '0');
  assert.equal(await cell(page, 'llm', 'replicas'), '1 ready');
  // The start was measured: the replicas cell's tooltip says how long one takes.
  await page.waitForFunction(
    (selector) => /^a replica start takes about \d+ s$/.test(document.querySelector(selector)?.getAttribute('title') ?? ''),
    'tbody.service[data-slug="llm"] [data-field="replicas"]',
    { timeout: 20_000 },
  );
  for (const answer of await Promise.all(queued)) assert.match(answer, /data: \[DONE\]/);
  await waitForCell(page, 'llm', 'errors', '0 of 3');
  // The queue chart has drawn the three waiting requests.
  const queueChart = await page.locator('tbody.service[data-slug="llm"] [data-chart="queued"] svg').getAttribute('aria-label');
  assert.match(queueChart ?? '', /peak 3/);
  // The streamed answers' time to first token (the cold start's wait included) and between tokens,
  // next to TTFB, with their charts; the service that streamed nothing shows none.
  const QUANTILES = /^[\d.]+( ms| s)? \/ [\d.]+ (ms|s)$/;
  await page.waitForFunction(
    (selector) => (document.querySelector(selector)?.textContent ?? '–').startsWith('–') === false,
    'tbody.service[data-slug="llm"] [data-field="betweenEvents"]',
    { timeout: 20_000 },
  );
  assert.match(await cell(page, 'llm', 'firstEvent'), QUANTILES);
  assert.match(await cell(page, 'llm', 'betweenEvents'), QUANTILES);
  assert.equal(await cell(page, 'api', 'firstEvent'), '– / –');
  const firstTokenChart = await page.locator('tbody.service[data-slug="llm"] [data-chart="firstEvent"] svg').getAttribute('aria-label');
  assert.match(firstTokenChart ?? '', /^Time to first token over the last 5 minutes: now p50 [\d.]+ (ms|s), p99 [\d.]+ (ms|s)$/);
  await page.screenshot({ path: join(OUTPUT, 'overview-ready.png'), fullPage: true });

  // ── the Request dialog, with the keyboard ─────────────────────────────────────────────────
  const button = page.locator('tbody.service[data-slug="llm"] .request-button');
  await button.focus();
  await page.keyboard.press('Enter');
  await page.waitForSelector('#request-dialog[open]');
  assert.equal(await page.locator('#dialog-base-url').innerText(), `${f.tg.origin}/api/v1/services/llm`);
  assert.ok(await page.evaluate(() => document.getElementById('request-dialog').contains(document.activeElement)), 'focus moves into the dialog');
  await page.screenshot({ path: join(OUTPUT, 'request-dialog.png') });

  // curl, streamed chat: copied with the Copy button, the token filled in, run by bash.
  await page.locator('.snippet .copy').click();
  await page.waitForFunction(() => document.getElementById('copy-status').textContent === 'Copied to the clipboard.');
  const copied: string = await page.evaluate(() => navigator.clipboard.readText());
  const curlChat = await snippetText(page);
  assert.equal(copied, curlChat, 'the clipboard holds the snippet');
  assert.match(curlChat, /^curl -N /);
  assert.ok(curlChat.includes('$SLUICE_TOKEN'), 'a placeholder for the token');
  const streamed = await runShell(curlChat.replaceAll('$SLUICE_TOKEN', TEST_TOKEN));
  assert.equal(streamed.code, 0, streamed.stderr);
  const events = streamed.chunks.join('');
  assert.match(events, /^data: \{.*"chat\.completion\.chunk"/m);
  assert.match(events, /"content":"You"/);
  assert.match(events, /data: \[DONE\]/);
  assert.ok(streamed.chunks.length > 1, 'the answer arrived in several pieces (curl -N prints each event as it comes)');

  // The other path shapes: KServe v2 and TorchServe, chosen with the arrow keys, model name typed.
  await page.locator('input[name="shape"][value="chat"]').focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.locator('#snippet').getAttribute('data-shape'), 'kserve');
  await page.locator('#model-name').fill('demo');
  const curlKserve = await snippetText(page);
  assert.ok(curlKserve.includes('/request/v2/models/demo/infer'));
  const kserve = await runShell(curlKserve.replaceAll('$SLUICE_TOKEN', TEST_TOKEN));
  assert.equal(kserve.code, 0, kserve.stderr);
  assert.deepEqual((JSON.parse(kserve.chunks.join('')) as { outputs: Array<{ data: number[] }> }).outputs[0]!.data, [2, 4, 6, 8]);

  await choose(page, 'shape', 'torchserve');
  const curlTorch = await snippetText(page);
  assert.ok(curlTorch.includes('/request/predictions/demo'));
  const torch = await runShell(curlTorch.replaceAll('$SLUICE_TOKEN', TEST_TOKEN));
  assert.equal(torch.code, 0, torch.stderr);
  assert.equal((JSON.parse(torch.chunks.join('')) as { model: string }).model, 'demo');

  // An invalid model name is flagged and never reaches the snippet.
  await page.locator('#model-name').fill("x' ; rm -rf ~");
  assert.equal(await page.locator('#model-name').getAttribute('aria-invalid'), 'true');
  assert.ok(!(await snippetText(page)).includes('rm -rf'));
  await page.locator('#model-name').fill('demo');

  // JavaScript: fetch for every shape, and the openai SDK for chat, run by node with SLUICE_TOKEN set.
  const scripts = mkdtempSync(join(OUTPUT, 'snippets-'));
  cleanups.push(async () => rmSync(scripts, { recursive: true, force: true }));
  const runNode = async (name: string, code: string): Promise<string> => {
    const file = join(scripts, name);
    writeFileSync(file, code);
    const { stdout } = await run(process.execPath, [file], { env: { ...process.env, SLUICE_TOKEN: TEST_TOKEN }, cwd: ROOT });
    return stdout;
  };
  await choose(page, 'client', 'js-fetch');
  assert.match(await runNode('torchserve-fetch.mjs', await snippetText(page)), /model: 'demo'/);
  await choose(page, 'shape', 'chat');
  assert.match(await runNode('chat-fetch.mjs', await snippetText(page)), /data: \[DONE\]/);
  await choose(page, 'client', 'js-openai');
  assert.match(await runNode('chat-openai.mjs', await snippetText(page)), /^You said: Hello there\n$/);

  // Python: httpx and openai; run when python3 has them, else at least parsed by python3.
  for (const client of ['python-openai', 'python-httpx']) {
    await choose(page, 'client', client);
    const code = await snippetText(page);
    const parsed = await pythonParses(code);
    if (parsed !== undefined) assert.equal(parsed, '', `the ${client} snippet is valid Python`);
    assert.ok(code.includes('os.environ["SLUICE_TOKEN"]') || code.includes("os.environ['SLUICE_TOKEN']"));
  }
  // The openai options exist only for the OpenAI path.
  await choose(page, 'shape', 'kserve');
  assert.equal(await page.locator('#client-choices label[data-only]').first().isHidden(), true);
  assert.equal(await page.locator('#snippet').getAttribute('data-client'), 'python-httpx');

  // The page never holds a token.
  const html = await page.content();
  assert.ok(!html.includes(TEST_TOKEN) && !html.includes(TEST_TOKEN_SHA256), 'no token or digest in the page');
  assert.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0, 'nothing stored');

  // Escape closes the dialog and gives the focus back to its button.
  await page.keyboard.press('Escape');
  await page.waitForSelector('#request-dialog:not([open])', { state: 'attached' });
  assert.equal(
    await page.evaluate(() => document.activeElement.matches('.request-button') && document.activeElement.closest('tbody').dataset.slug),
    'llm',
    'focus back on the Request button',
  );

  // ── a phone ───────────────────────────────────────────────────────────────────────────────
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(100);
  const overflow: number = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow}px too wide)`);
  assert.ok(await page.locator('tbody.service[data-slug="llm"] .request-button').isVisible());
  await page.screenshot({ path: join(OUTPUT, 'overview-phone.png'), fullPage: true });

  assert.deepEqual(problems, [], 'no console errors, page errors or failed requests');
});
