// Loads and validates the configuration once, at start (docs/configuration.md): reads JSON or YAML,
// applies the environment overrides, validates with the schema (config/schema.ts, which also
// checks the TLS files: config/tls.ts) and reports every problem at once, each as key, value and
// rule, never only the first.
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import type { Config } from './types.js';
import { ConfigError, type ConfigProblem, describeFsError, formatKey } from './problems.js';
import { configSchema, isRecord, RULE } from './schema.js';
import { resolveTracing } from './tracing-config.js';

export type { Config, ConfigProblem };
export { ConfigError };
export { formatProblem } from './problems.js';

/** Validates an already-parsed config (an object from JSON or YAML) and fills in every default. */
export function parseConfig(raw: unknown, env: NodeJS.ProcessEnv = {}): Config {
  return validate(raw, new Map(), env);
}

/** Environment variables that override config keys, applied before validation. */
const ENV_OVERRIDES = [
  { name: 'SLUICE_HOST', section: 'listen', key: 'host', number: false },
  { name: 'SLUICE_PORT', section: 'listen', key: 'port', number: true },
  { name: 'LOG_LEVEL', section: 'log', key: 'level', number: false },
] as const;

/**
 * Reads a JSON or YAML config file (YAML is a superset of JSON, so one parser reads both),
 * applies the SLUICE_HOST, SLUICE_PORT and LOG_LEVEL overrides and validates the result.
 * Throws ConfigError listing every problem, including a syntax error's line and column.
 */
export function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const reason = describeFsError(err);
    throw new ConfigError([{ key: 'file', value: path, rule: `cannot be read (${reason})` }], `cannot read the file (${reason})`);
  }
  const raw = parseText(text);
  const overridden = new Map<string, string>();
  return validate(applyEnv(raw, env, overridden), overridden, env);
}

function parseText(text: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const lines = text.split(/\r?\n/);
    const problems = doc.errors.map((e) => {
      const pos = e.linePos?.[0];
      const firstLine = e.message.split('\n')[0] ?? e.message;
      const rule = `YAML/JSON syntax error: ${firstLine.replace(/ at line \d+, column \d+:?$/, '')}`;
      if (pos === undefined) return { key: '(document)', value: undefined, rule };
      const source = (lines[pos.line - 1] ?? '').trim();
      return { key: `line ${pos.line}, column ${pos.col}`, value: source, rule };
    });
    const first = problems[0];
    throw new ConfigError(problems, `syntax error at ${first?.key ?? 'unknown position'}`);
  }
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new ConfigError([{ key: '(document)', value: undefined, rule: `cannot be read as data: ${message}` }], 'unreadable document');
  }
}

function applyEnv(raw: unknown, env: NodeJS.ProcessEnv, overridden: Map<string, string>): unknown {
  // Only a missing or object root can take overrides; anything else is reported by the schema.
  if (raw !== undefined && raw !== null && !isRecord(raw)) return raw;
  const root: Record<string, unknown> = { ...(raw ?? {}) };
  for (const o of ENV_OVERRIDES) {
    const text = env[o.name];
    if (text === undefined || text === '') continue; // empty = unset, as shells usually mean it
    const section = root[o.section];
    if (section !== undefined && !isRecord(section)) continue;
    const value = o.number && /^\d+$/.test(text) ? Number(text) : text;
    root[o.section] = { ...(section ?? {}), [o.key]: value };
    overridden.set(`${o.section}.${o.key}`, o.name);
  }
  return root;
}

function validate(raw: unknown, overridden: Map<string, string>, env: NodeJS.ProcessEnv): Config {
  // An empty document is YAML null; report it as a missing root rather than a type error.
  const result = configSchema.safeParse(raw === null ? undefined : raw, { reportInput: true });
  // The OTEL_* variables' problems are listed with the file's (tracing-config.ts).
  const envProblems: ConfigProblem[] = [];
  const tracing = resolveTracing(result.success ? result.data.tracing : undefined, env, envProblems);
  if (result.success && envProblems.length === 0) {
    // `tracing` is the merged settings, or absent (off): never the key as written.
    const { tracing: _written, ...config } = result.data;
    return tracing === undefined ? config : { ...config, tracing };
  }
  throw new ConfigError([...(result.success ? [] : toProblems(result.error.issues, overridden)), ...envProblems]);
}

const SECRET_KEY_RE = /pass|secret|token|key/i;

function toProblems(issues: readonly z.core.$ZodIssue[], overridden: Map<string, string>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const seen = new Set<string>();
  const add = (p: ConfigProblem): void => {
    const id = `${p.key}\u0000${p.rule}`;
    if (seen.has(id)) return; // an integer check and a range check may both fail with the same rule
    seen.add(id);
    problems.push(p);
  };
  for (const issue of issues) {
    const path = issue.path;
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) {
        const hint = suggest(k, keysAt(path));
        add({
          key: formatKey([...path, k]),
          // An unknown key named like a secret (`limits.storePassword`) may hold one: not echoed.
          value: SECRET_KEY_RE.test(k) ? '[redacted]' : isRecord(issue.input) ? issue.input[k] : undefined,
          rule: hint === undefined ? RULE.unknownKey : `${RULE.unknownKey} (did you mean ${hint}?)`,
        });
      }
      continue;
    }
    const key = formatKey(path);
    let rule = issue.message;
    if (issue.code === 'invalid_type' && issue.input === undefined) rule = `is required; ${rule}`;
    const env = overridden.get(key);
    if (env !== undefined) rule = `${rule} (value from environment variable ${env})`;
    add({ key, value: issue.input, rule });
  }
  return problems;
}

/** The keys the schema allows in the object at `path` (walked through the schema's definition). */
function keysAt(path: readonly PropertyKey[]): string[] {
  interface Def {
    type: string;
    shape?: Record<string, { _zod: { def: Def } }>;
    element?: { _zod: { def: Def } };
    valueType?: { _zod: { def: Def } };
    innerType?: { _zod: { def: Def } };
    in?: { _zod: { def: Def } };
  }
  const unwrap = (d: Def | undefined): Def | undefined => {
    while (d !== undefined) {
      const next = d.innerType ?? (d.type === 'pipe' ? d.in : undefined);
      if (next === undefined) return d;
      d = next._zod.def;
    }
    return d;
  };
  let def = unwrap((configSchema as unknown as { _zod: { def: Def } })._zod.def);
  for (const part of path) {
    if (def === undefined) return [];
    if (def.type === 'object') def = def.shape?.[String(part)]?._zod.def;
    else if (def.type === 'array') def = def.element?._zod.def;
    else if (def.type === 'record') def = def.valueType?._zod.def;
    else return [];
    def = unwrap(def);
  }
  return def?.type === 'object' && def.shape !== undefined ? Object.keys(def.shape) : [];
}

/** The allowed key closest to an unknown one, if it is close enough to be a typo. */
function suggest(unknown: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  const lower = unknown.toLowerCase();
  for (const known of allowed) {
    const d = known.toLowerCase() === lower ? 0.5 : editDistance(lower, known.toLowerCase());
    if (d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(1, Math.floor(unknown.length / 4)) ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => d[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    for (let j = 1; j <= b.length; j++) {
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(a.length, b.length);
}
