// The config file as the commands read it: loaded once, or every problem reported on stderr (the
// one-line reason first) and nothing started.
import { ConfigError, formatProblem, loadConfigFile } from '../config/load.js';
import type { Config } from '../config/types.js';

/** First line: the one-line reason; then every problem, one per line. */
export function reportConfigError(file: string, err: ConfigError): void {
  const lines = [`sluice: invalid config ${file}: ${err.summary}`, ...err.problems.map((p) => `  ${formatProblem(p)}`)];
  process.stderr.write(`${lines.join('\n')}\n`);
}

/** Loads the config, or reports why not and returns undefined. */
export function loadOrReport(file: string, env: NodeJS.ProcessEnv, load: (file: string, env: NodeJS.ProcessEnv) => Config = loadConfigFile): Config | undefined {
  try {
    return load(file, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      reportConfigError(file, err);
      return undefined;
    }
    throw err;
  }
}

/** The first line of an error's message, for a one-line reason. */
export function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0]?.trim() || 'unknown error';
}
