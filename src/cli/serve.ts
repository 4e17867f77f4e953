// A running gateway's life, for `sluice serve` and `sluice demo` alike: started once, drained on
// SIGTERM or SIGINT (a second one exits at once), its tokens reloaded on SIGHUP, its logs flushed
// before the process exits (docs/operations.md#signals).
import { loadConfigFile } from '../config/load.js';
import { tlsFingerprint } from '../config/tls.js';
import type { Config } from '../config/types.js';
import type { Gateway, TestHooks } from '../gateway/gateway.js';
import { createLogger, type Logger } from '../log/logger.js';
import { loadOrReport, oneLine } from './config-file.js';
import { settlesWithin } from '../time/bounded-wait.js';
import { reloadTokens } from './reload.js';

/** Before an exit, the log destination's flush is waited for this long at most. */
const LOG_EXIT_FLUSH_MS = 1_000;

/** `sluice serve --config FILE`: undefined while the gateway runs (the process exits when it stops), 1 if the config is invalid. */
export async function serve(file: string, env: NodeJS.ProcessEnv, testHooks: TestHooks | undefined): Promise<number | undefined> {
  const config = loadOrReport(file, env);
  if (config === undefined) return 1;
  const logger = createLogger(config.log.level);
  await runGateway({ file, config, load: () => loadConfigFile(file, env), logger, testHooks });
  return undefined;
}

export interface RunOptions {
  /** The config file, for log lines. */
  file: string;
  config: Config;
  /** Reads the config again (SIGHUP). */
  load: () => Config;
  logger: Logger;
  testHooks: TestHooks | undefined;
  /** Called once the gateway listens (the demo prints its banner). */
  started?: (gateway: Gateway) => void;
}

/** Starts the gateway and keeps it until a signal stops it; a failed start exits the process with 1. */
export async function runGateway(options: RunOptions): Promise<void> {
  const { config, logger } = options;
  const lifecycle = new Lifecycle(options);
  // Handlers go in before the start: a signal during the start must not kill the process with
  // its default action (SIGHUP would) or skip the drain; it is acted on once the gateway is up.
  lifecycle.listen();
  let gateway: Gateway;
  try {
    const { startGateway } = await import('../gateway/gateway.js');
    gateway = await startGateway(config, { logger, ...(options.testHooks === undefined ? {} : { testHooks: options.testHooks }) });
  } catch (err) {
    logger.error({ err }, 'gateway start failed');
    process.stderr.write(`sluice: cannot start: ${oneLine(err)}\n`);
    await flushLogs(logger);
    // Whatever the failed start left open (sockets, timers) must not keep the process alive.
    process.exit(1);
  }
  options.started?.(gateway);
  lifecycle.started(gateway);
}

/** Signals for a running gateway: drain on SIGTERM/SIGINT, reload tokens on SIGHUP. */
class Lifecycle {
  private gateway: Gateway | undefined;
  private stopSignal: NodeJS.Signals | undefined;
  private reloadPending = false;
  private config: Config;
  /** The contents of the certificate and key being served (uWS read them at start). */
  private readonly servedTls: string | undefined;

  constructor(private readonly options: RunOptions) {
    this.config = options.config;
    this.servedTls = options.config.listen.tls === undefined ? undefined : tlsFingerprint(options.config.listen.tls);
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

  private get logger(): Logger {
    return this.options.logger;
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
      this.logger.warn({ file: this.options.file }, 'config reload ignored while draining');
      return;
    }
    this.config = reloadTokens(gateway, this.config, this.options.load, this.options.file, this.servedTls, this.logger);
  }
}

/** Lets the asynchronous log destination write what it holds, in order, before an exit. */
async function flushLogs(logger: Logger): Promise<void> {
  await settlesWithin(new Promise<void>((resolve) => logger.flush(() => resolve())), LOG_EXIT_FLUSH_MS);
}
