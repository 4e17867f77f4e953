// docs/architecture.md#the-source-layout against the tree: its table names every folder and file of
// src/ in the row of the folder that holds it (and no path that is gone), and its layer diagram is
// the table the import rules hold (test/helpers/layers.ts, test/gateway/layers.unit.test.ts).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { layerDiagram, ROOT } from '../helpers/layers.js';

const page = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
const section = page.slice(page.indexOf('\n## The source layout\n'), page.indexOf('\n## ', page.indexOf('\n## The source layout\n') + 5));

/** The table's rows: the paths of the first column, and the whole row's text. */
const rows = section
  .split('\n')
  .filter((line) => line.startsWith('| `src/'))
  .map((line) => ({ paths: [...line.split('|')[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!), text: line }));

/** Every file and folder under src/, as paths from the repository's root (folders end with '/'). */
function tree(dir = join(ROOT, 'src')): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const shown = relative(ROOT, path);
    if (statSync(path).isDirectory()) out.push(`${shown}/`, ...tree(path));
    else out.push(shown);
  }
  return out;
}

/** The row of the deepest folder the table names that holds `path`. */
function rowOf(path: string): { row: (typeof rows)[number]; folder: string } | undefined {
  let best: { row: (typeof rows)[number]; folder: string } | undefined;
  for (const row of rows) {
    for (const p of row.paths) {
      if (p === path) return { row, folder: p };
      if (p.endsWith('/') && path.startsWith(p) && path !== p && (best === undefined || p.length > best.folder.length)) best = { row, folder: p };
    }
  }
  return best;
}

test('the source layout table was found', () => {
  assert.ok(rows.length >= 15, `${rows.length} rows`);
});

test('every path of the table exists', () => {
  assert.deepEqual(rows.flatMap((r) => r.paths).filter((p) => !existsSync(join(ROOT, p))), []);
});

test('the table names every folder and file of src/, in the row of the folder that holds it', () => {
  const unnamed = tree().filter((path) => {
    const found = rowOf(path);
    if (found === undefined) return true;
    if (found.folder === path) return false;
    // In its folder's row: its name, or its path below that folder (`kubernetes/`, `ui/`).
    const below = path.slice(found.folder.length);
    const name = below.endsWith('/') ? `${below.slice(0, -1).split('/').pop()}/` : below.split('/').pop()!;
    return !found.row.text.includes(`\`${name}\``) && !found.row.text.includes(`\`${below}\``);
  });
  assert.deepEqual(unnamed, []);
});

test('the layer diagram is the table the import rules hold', () => {
  const block = /```layers\n([\s\S]*?)\n```/.exec(section);
  assert.ok(block, 'a ```layers block in the source layout section');
  assert.equal(block[1], layerDiagram());
});
