// A config problem: where it is, what was there, and the rule it breaks; and the error that
// carries every problem of a config at once.

/** One thing wrong with a config: where (`services[0].slug`), what was there, and the rule it breaks. */
export interface ConfigProblem {
  key: string;
  value: unknown;
  rule: string;
}

/** A config that cannot be used. `message` lists every problem, one per line. */
export class ConfigError extends Error {
  readonly problems: ConfigProblem[];
  /** One line saying why the config is unusable ("3 problems", "YAML syntax error at line 2, column 7"). */
  readonly summary: string;

  constructor(problems: ConfigProblem[], summary?: string) {
    super(problems.map(formatProblem).join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
    this.summary = summary ?? `${problems.length} ${problems.length === 1 ? 'problem' : 'problems'}`;
  }
}

/** `services[0].timeouts.responseHeadersMs: -5 — must be an integer ≥ 1 …` */
export function formatProblem(p: ConfigProblem): string {
  return `${p.key}: ${formatValue(p.value)} — ${p.rule}`;
}

function formatValue(value: unknown): string {
  if (value === undefined) return '(missing)';
  let text: string;
  try {
    text = typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** `['services', 0, 'timeouts', 'responseHeadersMs']` → `services[0].timeouts.responseHeadersMs`. */
export function formatKey(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else {
      const s = String(part);
      if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(s)) out += out === '' ? s : `.${s}`;
      else out += `[${JSON.stringify(s)}]`;
    }
  }
  return out === '' ? '(config)' : out;
}


/** A file system error as a short reason: `ENOENT: no such file`. */
export function describeFsError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return 'ENOENT: no such file';
    if (code === 'EACCES') return 'EACCES: permission denied';
    if (code === 'EISDIR') return 'EISDIR: is a directory';
    return err.message;
  }
  return String(err);
}
