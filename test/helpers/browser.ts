// A real browser for the overview page's tests: Debian's chromium driven by playwright-core, with
// a throwaway profile. Without chromium (a developer machine) those tests are skipped; with CI=true
// they must run.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { type BrowserContext, chromium } from 'playwright-core';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const IN_CI = process.env['CI'] === 'true' || process.env['CI'] === '1';
export const SKIP_WITHOUT_CHROMIUM = !existsSync(CHROMIUM) && !IN_CI ? `no chromium at ${CHROMIUM}: run .ci/install-chromium (Debian) or set CHROMIUM_PATH` : false;

/**
 * A headless chromium on a new profile, closed at the end of `t` and only then its profile removed:
 * `t.after` hooks run in the order they were added, and a profile removed under a running chromium
 * fails (ENOTEMPTY: it still writes there), which left the browser, and the test file, running.
 */
export async function openBrowser(t: TestContext): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
  let context: BrowserContext | undefined;
  t.after(async () => {
    try {
      await context?.close();
    } finally {
      rmSync(profile, { recursive: true, force: true });
    }
  });
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'] });
  return context;
}
