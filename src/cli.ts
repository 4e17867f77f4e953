// The `sluice` command: serve | check | token | demo (docs/operations.md#the-command-line).
// bin/sluice.js imports this module, which runs main on import: it parses the command line and
// hands each command to its module under cli/.
// Exit codes: 0 clean exit, 1 invalid config or failed start (one-line reason first), 2 usage.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { check } from './cli/check.js';
import { oneLine, reportConfigError } from './cli/config-file.js';
import { USAGE } from './cli/help.js';
import { testHooksFrom } from './cli/test-hooks.js';
import { tokenCommand } from './cli/token.js';
import { ConfigError } from './config/load.js';

/** A command line that cannot be run: reported with the usage text, exit 2. */
class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

const HELP: Options = { help: { type: 'boolean', short: 'h' } };
const CONFIG: Options = { config: { type: 'string', short: 'c' } };

/** Parses one subcommand's flags; no positionals, no unknown flags. */
function flags<O extends Options>(command: string, args: string[], options: O) {
  try {
    return parseArgs({ args, options: { ...HELP, ...options }, strict: true, allowPositionals: false }).values;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) {
      // Node's messages go on with advice about `--`; the first sentence is the reason.
      const reason = (err as Error).message.split(/\.\s/)[0] ?? (err as Error).message;
      throw new UsageError(`sluice ${command}: ${reason}`);
    }
    throw err;
  }
}

/** Runs the command line; resolves to an exit code, or undefined while a server keeps running. */
async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number | undefined> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
      throw new UsageError('sluice: missing command');
    case '-h':
    case '--help':
    case 'help':
      if (rest.length > 0) throw new UsageError(`sluice ${command}: unexpected argument ${JSON.stringify(rest[0])}`);
      return help();
    case '-V':
    case '--version':
    case 'version': {
      if (rest.length > 0) throw new UsageError(`sluice ${command}: unexpected argument ${JSON.stringify(rest[0])}`);
      const { version } = await import('./cli/version.js');
      return version(env);
    }
    case 'serve': {
      const values = flags(command, rest, CONFIG);
      if (values.help === true) return help();
      if (await noUwsBuild(env)) return 1;
      const { serve } = await import('./cli/serve.js');
      return serve(configPath(command, values.config, env), env, testHooksFrom(env));
    }
    case 'check': {
      const values = flags(command, rest, CONFIG);
      if (values.help === true) return help();
      return check(configPath(command, values.config, env), env);
    }
    case 'token': {
      const values = flags(command, rest, { json: { type: 'boolean' }, name: { type: 'string' } });
      if (values.help === true) return help();
      const name = values.name;
      if (name !== undefined && (typeof name !== 'string' || name.length === 0)) throw new UsageError('sluice token: --name must not be empty');
      return tokenCommand(values.json === true, typeof name === 'string' ? name : undefined);
    }
    case 'demo': {
      const values = flags(command, rest, {});
      if (values.help === true) return help();
      if (await noUwsBuild(env)) return 1;
      return demo(env);
    }
    default:
      throw new UsageError(command.startsWith('-') ? `sluice: unknown option ${JSON.stringify(command)}` : `sluice: unknown command ${JSON.stringify(command)}`);
  }
}

/** True (and the one-line reason printed) when no uWebSockets.js build loads here: serve and demo cannot run. */
async function noUwsBuild(env: NodeJS.ProcessEnv): Promise<boolean> {
  const { uwsProblem } = await import('./cli/version.js');
  const problem = await uwsProblem(env);
  if (problem !== undefined) process.stderr.write(`sluice: ${problem}\n`);
  return problem !== undefined;
}

function help(): number {
  process.stdout.write(USAGE);
  return 0;
}

function configPath(command: string, flag: unknown, env: NodeJS.ProcessEnv): string {
  if (typeof flag === 'string' && flag !== '') return flag;
  const fromEnv = env.SLUICE_CONFIG;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  throw new UsageError(`sluice ${command}: missing --config FILE (or SLUICE_CONFIG)`);
}

/** `sluice demo`: undefined while it runs (the process exits when it stops), 1 if it cannot start. */
async function demo(env: NodeJS.ProcessEnv): Promise<number | undefined> {
  const { runDemo, DEMO_CONFIG_PATH } = await import('./cli/demo.js');
  try {
    await runDemo(env, testHooksFrom(env));
  } catch (err) {
    if (err instanceof ConfigError) {
      reportConfigError(DEMO_CONFIG_PATH, err);
      return 1;
    }
    process.stderr.write(`sluice: cannot start the demo: ${oneLine(err)}\n`);
    return 1;
  }
  return undefined;
}

main(process.argv.slice(2), process.env).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\n\n${USAGE}`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`sluice: ${oneLine(err)}\n`);
    process.exitCode = 1;
  },
);
