// Every curl upload the documentation shows is one a service accepts: curl's `-T` (`--upload-file`)
// sends PUT unless told otherwise, and a service allows POST (docs/api.md#methods: PUT gets 405
// unless the service lists it), so README.md, docs/, the benchmark's README and the overview page's
// Request dialog say `-X POST -T -` wherever they show `-T`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

function files(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(ROOT, 'docs', f));
  const ui = readdirSync(join(ROOT, 'src', 'admin', 'ui'))
    .filter((f) => f.endsWith('.js') || f.endsWith('.html'))
    .map((f) => join(ROOT, 'src', 'admin', 'ui', f));
  return [join(ROOT, 'README.md'), join(ROOT, 'bench', 'README.md'), ...docs, ...ui];
}

test('every curl -T (--upload-file) shown to users says -X POST', () => {
  const wrong: string[] = [];
  for (const file of files()) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/(^|[\s`'"])(-T|--upload-file)[\s=`]/.test(line) && !/-X\s*POST|--request\s+POST/.test(line)) wrong.push(`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`);
      });
  }
  assert.deepEqual(wrong, []);
});
