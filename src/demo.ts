// `sluice demo` (`npm start`): the bundled demo config, the toy model server and the gateway in
// one process, and a ready-to-paste curl line with the public development token.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as prettyStream } from 'pino-pretty';
import { startModelServer, type ModelServer } from '../examples/model-server.js';
import type { Config, ServiceConfig } from './config-types.js';
import { loadConfigFile } from './config.js';
import { createLogger } from './log.js';
import { startGateway } from './server.js';

/** Public, for local development only; examples/demo.yaml holds its SHA-256 digest. */
export const DEV_TOKEN = 'slc_dev_demo_token_do_not_use_in_production';

/** examples/demo.yaml in the package root (this file runs as dist/src/demo.js). */
export const DEMO_CONFIG_PATH = fileURLToPath(new URL('../../examples/demo.yaml', import.meta.url));

type Gateway = Awaited<ReturnType<typeof startGateway>>;

/**
 * Starts the demo and resolves once it has stopped: after SIGINT or SIGTERM it drains the
 * gateway, closes the model server and lets the process exit 0 (a second signal exits at once).
 * Rejects if the config is invalid (the loader's ConfigError) or a server cannot start.
 */
export async function runDemo(): Promise<void> {
  const config = withPackagePaths(loadConfigFile(DEMO_CONFIG_PATH, process.env));
  const logger = createLogger(config.log.level, readableLines());
  const service = config.services.find((s) => s.slug === 'demo') ?? config.services[0];
  if (!service) throw new Error(`${DEMO_CONFIG_PATH}: the demo config has no service`);

  // A static replica is the model server, started here; a launched one is the gateway's to start.
  let model: ModelServer | undefined;
  const replicaUrl = service.replicas.urls?.[0];
  if (replicaUrl !== undefined) {
    const { host, port } = listenAddress(replicaUrl);
    try {
      model = await startModelServer({ host, port });
    } catch (err) {
      throw new Error(`the demo model server cannot listen on ${replicaUrl}: ${(err as Error).message}`, { cause: err });
    }
    logger.info({ url: model.url }, 'demo model server ready');
  }

  let gateway: Gateway;
  try {
    gateway = await startGateway(config, { logger });
  } catch (err) {
    await model?.close();
    throw err;
  }

  process.stdout.write(banner(config, service, gateway.port, gateway.adminPort, model));

  const signal = await nextSignal();
  const force = (): never => process.exit(0);
  process.once('SIGINT', force).once('SIGTERM', force);
  logger.info({ signal }, 'demo stopping');

  const steps: Array<[string, () => Promise<void>]> = [
    ['gateway drain', () => gateway.drain()],
    ['gateway close', () => gateway.close()],
    ['model server close', () => model?.close() ?? Promise.resolve()],
  ];
  for (const [step, run] of steps) {
    try {
      await run();
    } catch (err) {
      process.exitCode = 1;
      logger.error({ step, err }, 'demo shutdown step failed');
    }
  }
  logger.info({}, 'demo stopped');
  logger.flush();
  // Nothing should be left keeping the process alive; if something is, do not hang on it.
  setTimeout(() => process.exit(), 2000).unref();
}

/**
 * The demo's log lines for people: time, level, message and the data on one line (pino-pretty),
 * coloured on a terminal. `sluice serve` keeps JSON lines for log collectors.
 */
function readableLines(): ReturnType<typeof prettyStream> {
  return prettyStream({
    destination: 1,
    sync: true,
    colorize: process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,name',
    singleLine: true,
  });
}

function nextSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', on).off('SIGTERM', on);
      resolve(signal);
    };
    process.on('SIGINT', on).on('SIGTERM', on);
  });
}

/**
 * The demo's replica command names `dist/examples/model-server.js` relative to the package root;
 * resolve it there, so `npx sluice demo` works from any directory.
 */
function withPackagePaths(config: Config): Config {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  for (const service of config.services) {
    const command = service.replicas.command;
    if (command !== undefined) service.replicas.command = command.map((arg) => (arg.startsWith('dist/') ? join(root, arg) : arg));
  }
  return config;
}

/** Where to listen for a static replica URL like `http://127.0.0.1:9000`. */
function listenAddress(url: string): { host: string; port: number } {
  const u = new URL(url);
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  return { host, port: u.port === '' ? 80 : Number(u.port) };
}

/** A host a local curl can reach: wildcard addresses become loopback. */
function displayHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** What a streamed request during the cold start shows, when the service keeps such requests alive. */
function keepAliveNote(service: ServiceConfig, staticReplica: boolean): string[] | undefined {
  const ms = service.queue.keepAliveMs;
  if (ms === 0 || staticReplica) return undefined;
  const every = ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
  return [`  While the model loads, the stream shows a ': waiting for a replica' comment every ${every},`, '  then the tokens.', ''];
}

function banner(config: Config, service: ServiceConfig, port: number, adminPort: number | undefined, model: ModelServer | undefined): string {
  const scheme = config.listen.tls ? 'https' : 'http';
  const insecure = config.listen.tls ? '-k ' : '';
  const gatewayUrl = `${scheme}://${displayHost(config.listen.host)}:${port}`;
  const serviceUrl = `${gatewayUrl}${config.basePath}/${service.slug}`;
  const devDigest = createHash('sha256').update(DEV_TOKEN).digest('hex');
  const hasDevToken = service.tokens.some((t) => t.sha256 === devDigest);
  const token = hasDevToken ? DEV_TOKEN : '<your token>';
  const chatUrl = `${serviceUrl}/request/v1/chat/completions`;
  const headers = `-H 'Authorization: Bearer ${token}' -H 'Content-Type: application/json'`;
  const body = (stream: boolean): string =>
    `'{"model":"demo",${stream ? '"stream":true,' : ''}"messages":[{"role":"user","content":"Hello there"}]}'`;
  return [
    '',
    'Sluice demo is running.',
    '',
    `  gateway   ${gatewayUrl}`,
    `  service   ${serviceUrl}`,
    ...(adminPort !== undefined && config.admin !== undefined
      ? [`  overview  http://${displayHost(config.admin.host)}:${adminPort}/  (services live, and the Request dialog)`]
      : []),
    model
      ? `  replica   ${model.url} (toy model server, started by the demo)`
      : `  replica   the toy model server, started by the gateway on the first request (a cold start:\n            it pretends to load a model for a moment) and stopped after ${service.replicas.idleTimeoutMs / 1000} s idle`,
    hasDevToken
      ? `  token     ${DEV_TOKEN}  (public, for local development only)`
      : `  token     the demo config's tokens were changed: use one of yours`,
    '',
    'Stream a chat completion:',
    '',
    `  curl ${insecure}-N ${chatUrl} ${headers} -d ${body(true)}`,
    '',
    ...(keepAliveNote(service, model !== undefined) ?? []),
    'The same without streaming:',
    '',
    `  curl ${insecure}${chatUrl} ${headers} -d ${body(false)}`,
    '',
    'Press Ctrl-C to stop.',
    '',
    '',
  ].join('\n');
}
