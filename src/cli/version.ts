// `sluice --version`, and the front end's build check that `serve` and `demo` make before anything
// else (docs/operations.md#the-command-line): on a platform where no uWebSockets.js build loads,
// the process exits 1 with one line saying why and what to do.
import { readFileSync } from 'node:fs';
import { libcName, loadUwsBuild, UwsBuildError } from '../http/uws-build.js';

/** Loads the front end's build (SLUICE_UWS_BUILD or the newest that loads); the one-line reason if none does. */
export async function uwsProblem(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  try {
    await loadUwsBuild(env.SLUICE_UWS_BUILD || undefined);
    return undefined;
  } catch (err) {
    if (err instanceof UwsBuildError) return err.message;
    throw err;
  }
}

/** `sluice --version`: Sluice's version, the front end's build, Node and the C library; 1 if no build loads. */
export async function version(env: NodeJS.ProcessEnv): Promise<number> {
  const problem = await uwsProblem(env);
  if (problem !== undefined) {
    process.stderr.write(`sluice: ${problem}\n`);
    return 1;
  }
  const build = await loadUwsBuild();
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  process.stdout.write(`sluice ${pkg.version} (uWebSockets.js ${build.id}, upstream ${build.upstream}; Node ${process.version}, ${libcName()})\n`);
  return 0;
}
