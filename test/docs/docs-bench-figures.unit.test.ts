// The benchmark figures that README.md and docs/ quote are those of bench/BENCHMARKS.md, the latest
// full run. The convention: a quoted figure is followed at once by a marker comment naming the
// cell it comes from, `36.4<!-- bench: Throughput; Sluice info; relay CPU µs/req --> µs`:
// the section of BENCHMARKS.md (its heading, with or without its number), the row (its first cell)
// and the column (its heading; `#2` after it for the second column of that name), apart by
// semicolons (a `|` would split a table's cell). The cell's
// figure is its text before any `[per-round values]`. A new full run that changes a figure fails
// this test until the docs quote the new one (docs/architecture.md#benchmarks-and-profiling).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

/** A table of BENCHMARKS.md: its column headings and its rows by first cell. */
interface Table {
  columns: string[];
  rows: Map<string, string[]>;
}

function cells(line: string): string[] {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
}

/** The first table of each `## ` section of a markdown file, by heading. */
function tablesBySection(markdown: string): Map<string, Table> {
  const tables = new Map<string, Table>();
  for (const section of markdown.split(/^## /m).slice(1)) {
    const heading = section.slice(0, section.indexOf('\n')).trim();
    const lines = section.split('\n');
    const start = lines.findIndex((l, i) => l.startsWith('|') && /^\|[\s:|-]+\|$/.test(lines[i + 1]?.trim() ?? ''));
    if (start < 0) continue;
    const rows = new Map<string, string[]>();
    for (let i = start + 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
      const row = cells(lines[i]!);
      rows.set(row[0]!, row);
    }
    tables.set(heading, { columns: cells(lines[start]!), rows });
  }
  return tables;
}

/** A quoted figure: where it is and what it says, and the cell it names. */
interface Quote {
  file: string;
  line: number;
  text: string;
  section: string;
  row: string;
  column: string;
}

const MARKER = /<!-- bench: ([^;>]+);([^;>]+);([^>]+?) -->/g;

function quotes(file: string): Quote[] {
  const markdown = readFileSync(join(ROOT, file), 'utf8');
  const found: Quote[] = [];
  for (const m of markdown.matchAll(MARKER)) {
    const before = markdown.slice(0, m.index);
    found.push({
      file,
      line: before.split('\n').length,
      text: before,
      section: m[1]!.trim(),
      row: m[2]!.trim(),
      column: m[3]!.trim(),
    });
  }
  return found;
}

/** The cell a quote names, or why there is none. */
function cellOf(tables: Map<string, Table>, q: Quote): string | Error {
  const table = [...tables].find(([heading]) => heading === q.section || heading.replace(/^\d+[a-z]?\. /, '') === q.section)?.[1];
  if (table === undefined) return new Error(`no section "${q.section}" with a table`);
  const row = table.rows.get(q.row);
  if (row === undefined) return new Error(`section "${q.section}" has no row "${q.row}"`);
  const [name, nth] = q.column.split(' #') as [string, string | undefined];
  const indexes = table.columns.flatMap((c, i) => (c === name ? [i] : []));
  const index = indexes[nth === undefined ? 0 : Number(nth) - 1];
  if (index === undefined) return new Error(`section "${q.section}" has no column "${q.column}"`);
  return row[index]!.replace(/\s*\[[^\]]*\]$/, '');
}

/** The files that may quote the benchmark: README.md and docs/. */
const FILES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const benchmarks = tablesBySection(readFileSync(join(ROOT, 'bench', 'BENCHMARKS.md'), 'utf8'));

test('every figure README.md and docs/ quote from bench/BENCHMARKS.md is the figure there', () => {
  const all = FILES.flatMap(quotes);
  const wrong: string[] = [];
  for (const q of all) {
    const cell = cellOf(benchmarks, q);
    const where = `${q.file}:${q.line} (${q.section}; ${q.row}; ${q.column})`;
    if (cell instanceof Error) {
      wrong.push(`${where}: ${cell.message}`);
      continue;
    }
    const quoted = q.text.trimEnd();
    const boundary = quoted.at(-cell.length - 1) ?? ' ';
    if (!quoted.endsWith(cell) || /[\d.,+-]/.test(boundary)) {
      wrong.push(`${where}: quotes "${quoted.slice(-20).split('\n').at(-1)}", BENCHMARKS.md says "${cell}"`);
    }
  }
  assert.deepEqual(wrong, [], 'docs quote the latest full run');
});

test('the places that quote the benchmark mark their figures', () => {
  const count = (file: string): number => quotes(file).length;
  // The README's "Performance" table, docs/operations.md's "Sizing" and docs/architecture.md's
  // "Where the time goes": a marker lost in an edit would let a figure drift unseen.
  assert.ok(count('README.md') >= 8, `README.md: ${count('README.md')} markers`);
  assert.ok(count('docs/operations.md') >= 8, `docs/operations.md: ${count('docs/operations.md')} markers`);
  assert.ok(count('docs/architecture.md') >= 20, `docs/architecture.md: ${count('docs/architecture.md')} markers`);
});

test('a marker naming no cell, or a figure that differs, is reported', () => {
  const sample = '## 1. Throughput\n\n| peer | req/s | ÷ nginx | CPU | ÷ nginx |\n| --- | ---: | ---: | ---: | ---: |\n| Sluice info | 21,954 [21,954, 19,146] | 0.91× | 36.4 [36.4, 42.7] | 1.51× |\n';
  const tables = tablesBySection(sample);
  const q = (section: string, row: string, column: string): Quote => ({ file: 'x', line: 1, text: '', section, row, column });
  assert.equal(cellOf(tables, q('Throughput', 'Sluice info', 'req/s')), '21,954');
  assert.equal(cellOf(tables, q('1. Throughput', 'Sluice info', 'CPU')), '36.4');
  assert.equal(cellOf(tables, q('Throughput', 'Sluice info', '÷ nginx #2')), '1.51×');
  assert.match(String(cellOf(tables, q('Throughput', 'nginx', 'CPU'))), /no row "nginx"/);
  assert.match(String(cellOf(tables, q('Latency', 'Sluice info', 'CPU'))), /no section "Latency"/);
});
