// The source layout's rules as data (docs/architecture.md#the-source-layout): every folder of src/,
// the thread it runs on, and its layer. test/gateway/layers.unit.test.ts holds the imports to them;
// test/docs/architecture-layout.unit.test.ts holds the page's diagram to this table.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

/**
 * Where a folder runs:
 * - `main`: the main thread only (the control plane and what only it uses);
 * - `data`: the data plane (a worker thread, or the main thread with `workers: 1`);
 * - `both`: the entry and the composition root, the only code that builds both planes;
 * - `shared`: below both planes, imported by either: the thread protocol, shared memory, wire code.
 */
export type Plane = 'main' | 'data' | 'both' | 'shared';

/** One folder of src/ (or a file of it, or a marked subfolder), keyed as a path under src/. */
export interface Place {
  readonly path: string;
  readonly plane: Plane;
}

/** The layers, top to bottom: a file imports only its own place or a place on a lower row. */
export const LAYERS: readonly (readonly Place[])[] = [
  [{ path: 'cli.ts', plane: 'both' }],
  [{ path: 'cli/', plane: 'both' }],
  [{ path: 'gateway/', plane: 'both' }],
  [{ path: 'control/', plane: 'main' }, { path: 'limits/store/', plane: 'main' }, { path: 'data/', plane: 'data' }],
  [{ path: 'admin/', plane: 'main' }, { path: 'relay/', plane: 'data' }],
  [{ path: 'upstream/', plane: 'data' }, { path: 'tracing/', plane: 'data' }],
  [{ path: 'threads/', plane: 'shared' }],
  [{ path: 'limits/', plane: 'shared' }, { path: 'metrics/', plane: 'shared' }],
  [{ path: 'config/', plane: 'shared' }, { path: 'replicas/', plane: 'shared' }],
  [{ path: 'http/', plane: 'shared' }, { path: 'log/', plane: 'shared' }, { path: 'time/', plane: 'shared' }],
  [{ path: 'tunables.ts', plane: 'shared' }],
];

/**
 * Folders a concern keeps to itself: entered only from the places listed (and from inside). A kind
 * of replicas is reached through the table of kinds (control/kinds/kinds.ts) and the seam
 * (control/service/kind-policy.ts), never named by the rest of the control plane; the composition
 * and the command line may name its options and credentials.
 */
export const ENTERED_ONLY_FROM: readonly { readonly folder: string; readonly from: readonly string[] }[] = [
  { folder: 'control/kinds/kubernetes/', from: ['control/kinds/kinds.ts', 'gateway/', 'cli/'] },
  { folder: 'control/kinds/launched/', from: ['control/kinds/kinds.ts', 'gateway/', 'cli/'] },
  { folder: 'control/kinds/static/', from: ['control/kinds/kinds.ts', 'gateway/', 'cli/'] },
];

/** The place of `file` (a path under src/): the longest path of the table that holds it. */
export function placeOf(file: string): { place: Place; row: number } | undefined {
  let best: { place: Place; row: number } | undefined;
  LAYERS.forEach((places, row) => {
    for (const place of places) {
      const holds = place.path.endsWith('/') ? file.startsWith(place.path) : file === place.path;
      if (holds && (best === undefined || place.path.length > best.place.path.length)) best = { place, row };
    }
  });
  return best;
}

/** Every .ts file under src/, as a path under src/. */
export function sourceFiles(dir = join(ROOT, 'src')): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts')) out.push(relative(join(ROOT, 'src'), path));
  }
  return out.sort();
}

/** One import of a source file: what it names, resolved to a path under src/ (or `..` when outside). */
export interface Import {
  readonly from: string;
  readonly to: string;
}

/**
 * The relative imports of `file` (a path under src/), as TypeScript's own pre-parser reads them:
 * `import`, `import type`, `export … from`, `import()` and `declare module` augmentations alike.
 */
export function importsOf(file: string, text = readFileSync(join(ROOT, 'src', file), 'utf8')): Import[] {
  const out: Import[] = [];
  for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
    if (!fileName.startsWith('.')) continue; // a package
    const to = relative(join(ROOT, 'src'), resolve(join(ROOT, 'src'), dirname(file), fileName)).replace(/\.js$/, '.ts');
    out.push({ from: file, to });
  }
  return out;
}

/** Why the import breaks a rule of the table, or undefined. */
export function brokenRule(i: Import): string | undefined {
  if (i.to.startsWith('..')) return 'imports from outside src/';
  const from = placeOf(i.from);
  const to = placeOf(i.to);
  if (from === undefined) return `${i.from} is in no place of the table`;
  if (to === undefined) return `${i.to} is in no place of the table`;
  for (const rule of ENTERED_ONLY_FROM) {
    if (i.to.startsWith(rule.folder) && !i.from.startsWith(rule.folder) && !rule.from.some((p) => (p.endsWith('/') ? i.from.startsWith(p) : i.from === p))) {
      return `enters ${rule.folder} from outside ${rule.from.join(', ')}`;
    }
  }
  if (from.place === to.place) return undefined;
  const a = from.place.plane;
  const b = to.place.plane;
  if (a === 'main' && b === 'data') return 'the control plane imports the data plane';
  if (a === 'data' && b === 'main') return 'the data plane imports a main-thread-only folder';
  if (a === 'shared' && b !== 'shared') return `a shared folder imports a ${b === 'both' ? 'composition' : `${b}-plane`} folder`;
  if (b === 'both' && a !== 'both') return 'imports the composition root';
  if (to.row <= from.row) return to.row === from.row ? 'imports a sibling on its own layer' : 'imports up the layers';
  return undefined;
}

/** The import cycles among `imports` (strongly connected components of more than one file, or a file importing itself). */
export function cycles(imports: readonly Import[]): string[][] {
  const next = new Map<string, string[]>();
  for (const i of imports) {
    if (!next.has(i.from)) next.set(i.from, []);
    next.get(i.from)!.push(i.to);
  }
  // Tarjan's algorithm.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (next.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

const PLANE_COLUMN: Record<Plane, number> = { main: 0, both: 1, shared: 1, data: 2 };

/** The table as docs/architecture.md draws it: one line per layer, top to bottom, the main thread left, the worker threads right. */
export function layerDiagram(): string {
  const width = 36;
  const lines = [`    ${'main thread only'.padEnd(width)}${'both planes: built / shared'.padEnd(width)}worker threads (data plane)`];
  LAYERS.forEach((places, row) => {
    const cells = ['', '', ''];
    for (const p of places) {
      const column = PLANE_COLUMN[p.plane];
      cells[column] = cells[column] === '' ? `src/${p.path}` : `${cells[column]}, src/${p.path}`;
    }
    lines.push(`${String(row + 1).padStart(2)}  ${cells[0]!.padEnd(width)}${cells[1]!.padEnd(width)}${cells[2]}`.trimEnd());
  });
  return lines.join('\n');
}
