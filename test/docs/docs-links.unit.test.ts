// The documentation holds together: every relative link and image in README.md, docs/ and the
// benchmark's README resolves to a file of the repository, and every `#anchor` to a heading or an
// explicit `<a id>` in that file; no link leaves the repository.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

/** The markdown files users read. */
function documents(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(ROOT, 'docs', f));
  return [join(ROOT, 'README.md'), join(ROOT, 'bench', 'README.md'), ...docs];
}

/** The text outside fenced code blocks and inline code spans. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'. */
function slug(heading: string): string {
  return heading
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorCache = new Map<string, Set<string>>();

/** Every anchor a markdown file offers: its headings (numbered when repeated) and `<a id>`s. */
function anchorsOf(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (anchors !== undefined) return anchors;
  anchors = new Set();
  const seen = new Map<string, number>();
  const text = readFileSync(file, 'utf8').replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const [, id] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id!);
  anchorCache.set(file, anchors);
  return anchors;
}

/** Inline links and images `[text](target)` and reference definitions `[ref]: target`. */
function links(markdown: string): string[] {
  const text = prose(markdown);
  const out: string[] = [];
  for (const [, target] of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push(target!);
  for (const [, target] of text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)) out.push(target!);
  return out;
}

test('every relative link in README.md, docs/ and bench/README.md resolves to a file and anchor in the repository', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of documents()) {
    const where = relative(ROOT, file);
    for (const target of links(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      checked++;
      const [path, anchor] = target.split('#', 2) as [string, string | undefined];
      const resolved = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (relative(ROOT, resolved).startsWith('..')) {
        broken.push(`${where}: ${target} points outside the repository`);
        continue;
      }
      if (!existsSync(resolved)) {
        broken.push(`${where}: ${target}: no such file`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
        broken.push(`${where}: ${target}: an anchor into a file that is not markdown`);
      } else if (!anchorsOf(resolved).has(anchor)) {
        broken.push(`${where}: ${target}: no heading or <a id> "${anchor}" in ${relative(ROOT, resolved)}`);
      }
    }
  }
  assert.ok(checked > 50, `links were found (${checked})`);
  assert.deepEqual(broken, []);
});

test('the anchor rules: headings as GitHub names them, repeats numbered, explicit ids', () => {
  assert.equal(slug('Kept alive while queued (`queue.keepAliveMs`)'), 'kept-alive-while-queued-queuekeepalivems');
  assert.equal(slug('Fact 9: Call `res.resume()` only to undo a pause'), 'fact-9-call-resresume-only-to-undo-a-pause');
  assert.equal(slug('The `/status` endpoint — fields'), 'the-status-endpoint--fields');
});

/** Every tracked text file of the repository a reader meets: sources, tests, benchmarks, examples, docs. */
function repositoryTexts(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|js|md|yaml|yml|html|css|json)$/.test(name) && !name.endsWith('.cpuprofile')) out.push(path);
    }
  };
  for (const dir of ['src', 'test', 'bench', 'examples', 'docs']) walk(join(ROOT, dir));
  return [...out, join(ROOT, 'README.md'), join(ROOT, 'Dockerfile')];
}

test('no text points outside the repository: no design notes, no contract sections, no ../shared', () => {
  const outside = /\.\.\/shared|shared\/design|CONTRACT\.md|ARCHITECTURE\.md|contract sections? \d|ARCHITECTURE fact/;
  const found: string[] = [];
  for (const file of repositoryTexts()) {
    if (file === fileURLToPath(import.meta.url).replace(/dist\/test\/docs\/docs-links\.unit\.test\.js$/, 'test/docs/docs-links.unit.test.ts')) continue;
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        // "section N" with no RFC before it cites a design note's section.
        const bareSection = /\bsections? \d/.test(line) && !/RFC \d+,? sections? \d/.test(line);
        if (outside.test(line) || bareSection) found.push(`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
      });
  }
  assert.deepEqual(found, []);
});

test('every "fact N" the code cites is an anchor of docs/architecture.md', () => {
  const anchors = anchorsOf(join(ROOT, 'docs', 'architecture.md'));
  const cited = new Set<number>();
  for (const file of repositoryTexts().filter((f) => /\.(ts|js)$/.test(f))) {
    const text = readFileSync(file, 'utf8');
    for (const [, n] of text.matchAll(/\bfact (\d+)\b/g)) cited.add(Number(n));
    for (const [, a, how, b] of text.matchAll(/\bfacts (\d+) (and|to|–) (\d+)\b/g)) {
      if (how === 'and') [a, b].forEach((n) => cited.add(Number(n)));
      else for (let n = Number(a); n <= Number(b); n++) cited.add(n);
    }
    for (const [, n] of text.matchAll(/#fact-(\d+)\b/g)) cited.add(Number(n));
  }
  assert.ok(cited.size > 5, `facts are cited (${[...cited].join(', ')})`);
  assert.deepEqual([...cited].sort((x, y) => x - y).filter((n) => !anchors.has(`fact-${n}`)), []);
});
