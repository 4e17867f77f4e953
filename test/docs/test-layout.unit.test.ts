// The tests are laid out like the code (docs/architecture.md#tests): every test file sits one
// folder below test/ (the depth `npm test`'s shell glob reaches), in a folder named after a folder
// of src/ or one of the few that are not code (e2e, examples, bench, docs, kubernetes).
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const NOT_CODE = new Set(['e2e', 'examples', 'bench', 'docs', 'kubernetes']);
const SHARED = new Set(['helpers', 'fixtures']);

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...testFiles(path));
    else if (name.endsWith('.test.ts')) out.push(relative(join(ROOT, 'test'), path));
  }
  return out;
}

test('every test file is test/<folder>/<name>.test.ts, the folder one of src/ or e2e, examples, bench, docs, kubernetes', () => {
  const srcFolders = new Set(readdirSync(join(ROOT, 'src')).filter((name) => statSync(join(ROOT, 'src', name)).isDirectory()));
  const files = testFiles(join(ROOT, 'test'));
  assert.ok(files.length > 0);
  const misplaced = files.filter((file) => {
    const parts = file.split('/');
    return parts.length !== 2 || SHARED.has(parts[0]!) || !(srcFolders.has(parts[0]!) || NOT_CODE.has(parts[0]!));
  });
  assert.deepEqual(misplaced, []);
});
