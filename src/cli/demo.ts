// `sluice demo` (`npm start`): the gateway with the bundled demo config, whose replica (the toy
// model server, dist/examples/model-server.js) the gateway launches on the first request, and a
// ready-to-paste curl line with the public development token.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build as prettyStream } from 'pino-pretty';
import { loadConfigFile } from '../config/load.js';
import type { Config, ServiceConfig } from '../config/types.js';
import type { TestHooks } from '../gateway/gateway.js';
import { createLogger } from '../log/logger.js';
import { runGateway } from './serve.js';

/** Public, for local development only; examples/demo.yaml holds its SHA-256 digest. */
export const DEV_TOKEN = 'slc_dev_demo_token_do_not_use_in_production';

/** examples/demo.yaml in the package root (this file runs as dist/src/cli/demo.js). */
export const DEMO_CONFIG_PATH = fileURLToPath(new URL('../../../examples/demo.yaml', import.meta.url));

/**
 * Runs the demo gateway until a signal stops it, as `sluice serve` runs one (serve.ts): SIGINT or
 * SIGTERM drains it (which stops the model server it launched) and exits 0; SIGHUP reloads the
 * demo config's tokens. Throws if the config is invalid (the loader's ConfigError).
 */
export async function runDemo(env: NodeJS.ProcessEnv, testHooks: TestHooks | undefined): Promise<void> {
  const config = loadDemoConfig(env);
  const logger = createLogger(config.log.level, readableLines());
  const service = config.services.find((s) => s.slug === 'demo') ?? config.services[0];
  if (!service) throw new Error(`${DEMO_CONFIG_PATH}: the demo config has no service`);
  await runGateway({
    file: DEMO_CONFIG_PATH,
    config,
    load: () => loadDemoConfig(env),
    logger,
    testHooks,
    started: (gateway) => process.stdout.write(banner(config, service, gateway.port, gateway.adminPort)),
  });
}

/** examples/demo.yaml, with the replica command's paths made absolute (see withPackagePaths). */
function loadDemoConfig(env: NodeJS.ProcessEnv): Config {
  return withPackagePaths(loadConfigFile(DEMO_CONFIG_PATH, env));
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

/**
 * The demo's replica command names `dist/examples/model-server.js` relative to the package root;
 * resolve it there, so `npx sluice demo` works from any directory.
 */
function withPackagePaths(config: Config): Config {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  for (const service of config.services) {
    const command = service.replicas.command;
    if (command !== undefined) service.replicas.command = command.map((arg) => (arg.startsWith('dist/') ? join(root, arg) : arg));
  }
  return config;
}

/** A host a local curl can reach: wildcard addresses become loopback. */
function displayHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** What a streamed request during the cold start shows, when the service keeps such requests alive. */
function keepAliveNote(service: ServiceConfig): string[] | undefined {
  const ms = service.queue.keepAliveMs;
  if (ms === 0 || service.replicas.command === undefined) return undefined;
  const every = ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
  return [`  While the model loads, the stream shows a ': waiting for a replica' comment every ${every},`, '  then the tokens.', ''];
}

function banner(config: Config, service: ServiceConfig, port: number, adminPort: number | undefined): string {
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
    service.replicas.command === undefined
      ? `  replica   ${service.replicas.urls?.join(', ') ?? 'the service\'s replicas'} (not started by the demo)`
      : `  replica   the toy model server, started by the gateway on the first request (a cold start:\n            it pretends to load a model for a moment) and stopped after ${service.replicas.idleTimeoutMs / 1000} s idle`,
    hasDevToken
      ? `  token     ${DEV_TOKEN}  (public, for local development only)`
      : `  token     the demo config's tokens were changed: use one of yours`,
    '',
    'Stream a chat completion:',
    '',
    `  curl ${insecure}-N ${chatUrl} ${headers} -d ${body(true)}`,
    '',
    ...(keepAliveNote(service) ?? []),
    'The same without streaming:',
    '',
    `  curl ${insecure}${chatUrl} ${headers} -d ${body(false)}`,
    '',
    'Press Ctrl-C to stop.',
    '',
    '',
  ].join('\n');
}
