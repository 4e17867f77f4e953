// Benchmark settings come from the environment (house style); a bad value stops the run at once,
// naming the variable and the rule.

export function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name}: "${raw}" — must be an integer from ${min} to ${max}`);
  }
  return n;
}

export function choiceEnv<T extends string>(name: string, fallback: T, allowed: readonly T[]): T {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new Error(`${name}: "${raw}" — must be one of ${allowed.join(', ')}`);
  }
  return raw as T;
}

export function listEnv<T extends string>(name: string, fallback: readonly T[], allowed: readonly T[]): T[] {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return [...fallback];
  const items = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const bad = items.filter((s) => !(allowed as readonly string[]).includes(s));
  if (items.length === 0 || bad.length > 0) {
    throw new Error(`${name}: "${raw}" — must be a comma-separated list of ${allowed.join(', ')}`);
  }
  return items as T[];
}
