// Every log message the gateway writes is documented where an operator looks for it: the section
// "Logs" of docs/operations.md, or for the Kubernetes source the section "What the logs say" of
// docs/kubernetes.md, each as a `msg` in code quotes; and every message those tables name is one
// the code writes. Messages are fixed strings (the data goes in the object before them), so they
// are read from the source: the last argument of each `log.info(…)`, `logger.warn(…)`, … call.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** The text of a call's arguments, from just after its `(` to its matching `)`. */
function argumentsAt(source: string, start: number): string {
  let depth = 1;
  let quote = '';
  for (let i = start; i < source.length; i++) {
    const c = source[i]!;
    if (quote !== '') {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === "'" || c === '"' || c === '`') quote = c;
    else if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      if (--depth === 0) return source.slice(start, i);
    }
  }
  return source.slice(start);
}

interface Logged {
  where: string;
  message: string | undefined;
  last: string;
}

const CALL = /\b\w*[lL]og(?:ger)?\.(?:trace|debug|info|warn|error|fatal)\(/g;

/** Every log call under src/: its message when it is a fixed string (a literal, or a constant of the file). */
function logged(): Logged[] {
  const found: Logged[] = [];
  for (const file of sourceFiles(join(ROOT, 'src'))) {
    const source = readFileSync(file, 'utf8');
    const code = source.replace(/^\s*\/\/.*$/gm, (line) => ' '.repeat(line.length));
    for (const m of code.matchAll(CALL)) {
      const args = argumentsAt(code, m.index + m[0].length).trim().replace(/,$/, '').trim();
      const where = `${relative(ROOT, file)}:${code.slice(0, m.index).split('\n').length}`;
      const literal = /(?:^|,)\s*'((?:[^'\\]|\\.)*)'$/.exec(args) ?? /(?:^|,)\s*`([^`$\\]*)`$/.exec(args);
      if (literal !== null) {
        found.push({ where, message: literal[1]!, last: args });
        continue;
      }
      const name = /(?:^|,)\s*([A-Z_][A-Z0-9_]*)$/.exec(args)?.[1];
      const constant = name === undefined ? null : new RegExp(`\\bconst ${name}\\s*=\\s*'([^']*)'`).exec(source);
      found.push({ where, message: constant?.[1], last: args });
    }
  }
  return found;
}

function section(file: string, heading: string): string {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `${file} has a section "${heading}"`);
  const level = heading.split(' ')[0]!;
  const ends = [...text.slice(start + heading.length + 2).matchAll(/^#+ /gm)].find((e) => e[0].trim().length <= level.length);
  return text.slice(start, ends === undefined ? undefined : start + heading.length + 2 + ends.index);
}

const documented = [section('docs/operations.md', '## Logs'), section('docs/kubernetes.md', '## What the logs say')];

test('every log message the code writes is a fixed string, documented in docs/operations.md or docs/kubernetes.md', () => {
  const calls = logged();
  assert.ok(calls.length >= 60, `found ${calls.length} log calls`);
  const notFixed = calls.filter((c) => c.message === undefined).map((c) => `${c.where}: ${c.last.slice(-60)}`);
  assert.deepEqual(notFixed, [], 'messages are fixed strings');
  const isDocumented = (message: string): boolean => documented.some((d) => d.includes(`\`${message}\``) || d.includes(`"msg":"${message}"`));
  const missing = [...new Set(calls.filter((c) => !isDocumented(c.message!)).map((c) => `${c.message} (${c.where})`))];
  assert.deepEqual(missing, [], 'every message is in a logs table');
});

test('every message the logs tables name is one the code writes', () => {
  const written = new Set(logged().map((c) => c.message));
  const stale: string[] = [];
  for (const doc of documented) {
    for (const row of doc.matchAll(/^\| ([^|]*`[^|]*) \|/gm)) {
      for (const name of row[1]!.matchAll(/`([^`]+)`/g)) {
        // The pointer row to the Kubernetes table (prefixes such as `kubernetes …`), and field names in the access line's table.
        if (name[1]!.endsWith(' …') || !/ /.test(name[1]!) && !written.has(name[1]!)) continue;
        if (!written.has(name[1]!)) stale.push(name[1]!);
      }
    }
  }
  assert.deepEqual(stale, [], 'no table names a message that is gone');
});
