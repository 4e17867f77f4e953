// The `sluice` command (contract section 8): serve | check | token | demo.
// bin/sluice.js imports this module, which runs main on import.
// Exit codes: 0 clean exit, 1 invalid config or failed start (one-line reason first), 2 usage.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Config } from './config-types.js';
import { ConfigError, formatProblem, loadConfigFile } from './config.js';
import { tlsFingerprint, tlsWarnings } from './config/tls.js';
import { createLogger, type Logger } from './log.js';
import type { Gateway } from './server.js';
import { generateToken } from './token.js';

const USAGE = `Usage: sluice <command> [options]

A streaming request relay for inference services.

Commands:
  serve --config FILE    run the gateway
  check --config FILE    validate a config: exit 0, or 1 with every problem listed
  token [--json] [--name NAME]
                         print a new bearer token and the SHA-256 digest for the config
  demo                   run the bundled demo service and print a ready-to-paste curl line

Options:
  -c, --config FILE      config file, JSON or YAML (default: $SLUICE_CONFIG)
      --json             token: print {"token":…,"sha256":…}
      --name NAME        token: the name to show in the config snippet
  -h, --help             show this help

Environment:
  SLUICE_CONFIG          config file when --config is not given
  SLUICE_HOST, SLUICE_PORT, LOG_LEVEL
                         override listen.host, listen.port and log.level

Signals (serve): SIGTERM/SIGINT drain then exit 0 (a second one exits at once with 1);
SIGHUP reloads the config's tokens (a renewed TLS certificate needs a restart).

Exit codes: 0 ok, 1 invalid config or failed start, 2 usage error.
`;

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
      process.stdout.write(USAGE);
      return 0;
    case 'serve': {
      const values = flags(command, rest, CONFIG);
      if (values.help === true) return help();
      return serve(configPath(command, values.config, env), env);
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
      return token(values.json === true, typeof name === 'string' ? name : undefined);
    }
    case 'demo': {
      const values = flags(command, rest, {});
      if (values.help === true) return help();
      return demo();
    }
    default:
      throw new UsageError(command.startsWith('-') ? `sluice: unknown option ${JSON.stringify(command)}` : `sluice: unknown command ${JSON.stringify(command)}`);
  }
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

/** First line: the one-line reason; then every problem, one per line. */
function reportConfigError(file: string, err: ConfigError): void {
  const lines = [`sluice: invalid config ${file}: ${err.summary}`, ...err.problems.map((p) => `  ${formatProblem(p)}`)];
  process.stderr.write(`${lines.join('\n')}\n`);
}

/** Loads the config, or reports why not and resolves to undefined. */
function load(file: string, env: NodeJS.ProcessEnv): Config | undefined {
  try {
    return loadConfigFile(file, env);
  } catch (err) {
    if (err instanceof ConfigError) {
      reportConfigError(file, err);
      return undefined;
    }
    throw err;
  }
}

async function check(file: string, env: NodeJS.ProcessEnv): Promise<number> {
  const config = load(file, env);
  if (config === undefined) return 1;
  const n = config.services.length;
  process.stdout.write(`config OK: ${n} ${n === 1 ? 'service' : 'services'}\n`);
  if (config.listen.tls !== undefined) for (const warning of tlsWarnings(config.listen.tls)) process.stdout.write(`warning: ${warning}\n`);
  for (const warning of await kubernetesWarnings(config, env)) process.stdout.write(`warning: ${warning}\n`);
  return 0;
}

/**
 * Kubernetes services whose credentials cannot be loaded on this machine: a warning, not an error,
 * since a config is often checked outside the cluster it is meant for (where the service account
 * is mounted); `serve` exits 1 with the same reason.
 */
async function kubernetesWarnings(config: Config, env: NodeJS.ProcessEnv): Promise<string[]> {
  const services = config.services.map((s, i) => ({ i, target: s.replicas.kubernetes })).filter((s) => s.target !== undefined);
  if (services.length === 0) return [];
  const { loadCredentials, KubeCredentialsError } = await import('./control/sources/kubernetes/credentials.js');
  const warnings: string[] = [];
  for (const { i, target } of services) {
    try {
      loadCredentials({ kubeconfig: target!.kubeconfig, namespace: target!.namespace, env });
    } catch (err) {
      if (!(err instanceof KubeCredentialsError)) throw err;
      warnings.push(`services[${i}].replicas.kubernetes: ${err.message} (serve exits 1 where this is so)`);
    }
  }
  return warnings;
}

function token(json: boolean, name: string | undefined): number {
  const { token, sha256 } = generateToken();
  if (json) {
    process.stdout.write(`${JSON.stringify({ token, sha256 })}\n`);
    return 0;
  }
  const shownName = name === undefined ? '<name>' : /^[A-Za-z0-9][A-Za-z0-9_.@-]*$/.test(name) ? name : JSON.stringify(name);
  process.stdout.write(
    [
      `token:  ${token}`,
      `sha256: ${sha256}`,
      '',
      "Give the token to the caller; add the digest to the service's tokens in the config:",
      `  - { name: ${shownName}, sha256: "${sha256}" }`,
      '',
    ].join('\n'),
  );
  return 0;
}

async function demo(): Promise<number | undefined> {
  const { runDemo, DEMO_CONFIG_PATH } = await import('./demo.js');
  try {
    await runDemo();
  } catch (err) {
    if (err instanceof ConfigError) {
      reportConfigError(DEMO_CONFIG_PATH, err);
      return 1;
    }
    process.stderr.write(`sluice: cannot start the demo: ${oneLine(err)}\n`);
    return 1;
  }
  // runDemo has stopped everything and set process.exitCode; let the process end by itself.
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// serve

async function serve(file: string, env: NodeJS.ProcessEnv): Promise<number | undefined> {
  const config = load(file, env);
  if (config === undefined) return 1;
  const logger = createLogger(config.log.level);
  if (config.listen.tls !== undefined) for (const warning of tlsWarnings(config.listen.tls)) logger.warn({ warning }, 'TLS certificate warning');
  const lifecycle = new Lifecycle(file, env, config, logger);
  // Handlers go in before the start: a signal during the start must not kill the process with
  // its default action (SIGHUP would) or skip the drain; it is acted on once the gateway is up.
  lifecycle.listen();
  try {
    const { startGateway } = await import('./server.js');
    lifecycle.started(await startGateway(config, { logger }));
  } catch (err) {
    logger.error({ err }, 'gateway start failed');
    process.stderr.write(`sluice: cannot start: ${oneLine(err)}\n`);
    await flushLogs(logger);
    // Whatever the failed start left open (sockets, timers) must not keep the process alive.
    process.exit(1);
  }
  return undefined;
}

/** Signals for a running gateway: drain on SIGTERM/SIGINT, reload tokens on SIGHUP. */
class Lifecycle {
  private gateway: Gateway | undefined;
  private stopSignal: NodeJS.Signals | undefined;
  private reloadPending = false;
  /** The contents of the certificate and key being served (uWS read them at start). */
  private readonly servedTls: string | undefined;

  constructor(
    private readonly file: string,
    private readonly env: NodeJS.ProcessEnv,
    private config: Config,
    private readonly logger: Logger,
  ) {
    this.servedTls = config.listen.tls === undefined ? undefined : tlsFingerprint(config.listen.tls);
  }

  listen(): void {
    const stop = (signal: NodeJS.Signals): void => this.onStop(signal);
    process.on('SIGTERM', stop).on('SIGINT', stop);
    process.on('SIGHUP', () => this.onReload());
  }

  started(gateway: Gateway): void {
    this.gateway = gateway;
    if (this.stopSignal !== undefined) void this.shutdown(this.stopSignal);
    else if (this.reloadPending) this.onReload();
  }

  private onStop(signal: NodeJS.Signals): void {
    if (this.stopSignal !== undefined) {
      this.logger.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    this.stopSignal = signal;
    if (this.gateway !== undefined) void this.shutdown(signal);
  }

  private async shutdown(signal: NodeJS.Signals): Promise<void> {
    const gateway = this.gateway;
    if (gateway === undefined) return;
    this.logger.info({ signal, drainTimeoutMs: this.config.drainTimeoutMs }, 'draining');
    // The gateway bounds the drain by drainTimeoutMs; this is the backstop if it hangs anyway.
    const backstopMs = this.config.drainTimeoutMs + 10_000;
    setTimeout(() => {
      this.logger.error({ backstopMs }, 'drain did not finish, exiting');
      process.exit(1);
    }, backstopMs).unref();
    let code = 0;
    try {
      await gateway.drain();
    } catch (err) {
      code = 1;
      this.logger.error({ err }, 'drain failed');
    }
    try {
      await gateway.close();
    } catch (err) {
      code = 1;
      this.logger.error({ err }, 'close failed');
    }
    this.logger.info({ code }, 'stopped');
    await flushLogs(this.logger);
    process.exit(code);
  }

  private onReload(): void {
    const gateway = this.gateway;
    if (gateway === undefined) {
      this.reloadPending = true;
      return;
    }
    this.reloadPending = false;
    if (this.stopSignal !== undefined) {
      this.logger.warn({ file: this.file }, 'config reload ignored while draining');
      return;
    }
    let next: Config;
    try {
      next = loadConfigFile(this.file, this.env);
    } catch (err) {
      if (err instanceof ConfigError) {
        this.logger.error({ file: this.file, reason: err.summary, problems: err.problems.map(formatProblem) }, 'config reload failed, keeping the running config');
      } else {
        this.logger.error({ file: this.file, err }, 'config reload failed, keeping the running config');
      }
      return;
    }
    try {
      gateway.reload(next);
    } catch (err) {
      this.logger.error({ file: this.file, err }, 'config reload failed, keeping the running config');
      return;
    }
    const needRestart = changesBeyondTokens(this.config, next);
    this.config = next;
    this.logger.info({ file: this.file, services: next.services.length }, 'config reloaded');
    if (needRestart.length > 0) {
      this.logger.warn({ keys: needRestart }, 'config changes other than tokens take effect on restart');
    }
    // uWS cannot swap the certificate of a listening app: a renewed one is served after a restart.
    const tls = next.listen.tls;
    if (tls !== undefined && this.servedTls !== undefined && tlsFingerprint(tls) !== this.servedTls) {
      this.logger.warn({ certFile: tls.certFile, keyFile: tls.keyFile }, 'TLS certificate not reloaded: the files changed, restart to serve them');
    }
  }
}

/** Keys whose values differ between two configs, ignoring tokens (the only thing a reload applies). */
function changesBeyondTokens(before: Config, after: Config): string[] {
  const changed: string[] = [];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)] as (keyof Config)[]);
  for (const key of keys) {
    if (key === 'services') continue;
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) changed.push(key);
  }
  const withoutTokens = (c: Config): Map<string, string> =>
    new Map(c.services.map((s) => [s.slug, JSON.stringify({ ...s, tokens: undefined })]));
  const a = withoutTokens(before);
  const b = withoutTokens(after);
  for (const slug of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(slug) !== b.get(slug)) changed.push(`services[${slug}]`);
  }
  return changed;
}

/** Lets the asynchronous log destination write what it holds, in order, before an exit. */
function flushLogs(logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 1000);
    logger.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0]?.trim() || 'unknown error';
}

// ---------------------------------------------------------------------------------------------

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
