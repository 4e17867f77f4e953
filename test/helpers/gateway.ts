// Test harness: the real gateway on port 0 with a config built through the real validator,
// and its log lines captured so tests can assert on them.
import { Writable } from 'node:stream';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { createLogger } from '../../src/log/logger.js';
import { testHooksFrom } from '../../src/cli/test-hooks.js';
import { type Gateway, startGateway } from '../../src/gateway/gateway.js';
import { loadUwsBuild } from '../../src/http/uws-build.js';
import { sha256Hex } from '../../src/cli/token.js';

export const TEST_TOKEN = 'slc_test_token_for_the_black_box_tests_0123456789';
export const TEST_TOKEN_SHA256 = sha256Hex(TEST_TOKEN);
export const AUTH = { authorization: `Bearer ${TEST_TOKEN}` };

/**
 * Token-like strings no gateway may ever log (docs/api.md#authentication). Every gateway a test starts
 * checks its whole log on close; tests that present other tokens add them with `secret()`.
 * Only strings of 12 characters or more are checked (a shorter one may occur by chance).
 */
const SECRETS = new Set<string>([TEST_TOKEN]);

/** Registers `token` as a secret that no gateway's log may contain; returns it. */
export function secret(token: string): string {
  if (token.length >= 12) SECRETS.add(token);
  return token;
}

/** Throws if `text` (a gateway's log) contains a registered secret. */
export function assertNoSecrets(text: string, where = 'the gateway log'): void {
  for (const token of SECRETS) {
    const at = text.indexOf(token);
    if (at >= 0) throw new Error(`a token appeared in ${where}: …${text.slice(Math.max(0, at - 80), at)}[token]…`);
  }
}

/** A raw service entry as it would appear in a config file; the validator fills the defaults. */
export type RawService = Record<string, unknown> & { slug?: string; replicas: Record<string, unknown> };

export interface TestGateway {
  gateway: Gateway;
  port: number;
  /** `http://127.0.0.1:PORT` */
  origin: string;
  /** The relay URL of `path` on service `slug` (default: the first service). */
  url(path: string, slug?: string): string;
  /** Every log line so far, parsed. */
  logs: Record<string, unknown>[];
  /** The raw log text so far. */
  logText(): string;
  close(): Promise<void>;
}

export function rawService(replicas: Record<string, unknown>, extra: Record<string, unknown> = {}): RawService {
  return { slug: 'svc', tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }], replicas, ...extra };
}

/** `env`: the environment the config is read with (the OTEL_* variables of tracing), none by default. */
export async function startTestGateway(services: RawService | RawService[], extra: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}): Promise<TestGateway> {
  const list = Array.isArray(services) ? services : [services];
  const config: Config = parseConfig({ listen: { host: '127.0.0.1', port: 0 }, log: { level: 'info' }, services: list, ...extra }, env);
  const chunks: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      const text = chunk.toString();
      chunks.push(text);
      for (const line of text.split('\n')) if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const logger = createLogger(config.log.level, sink);
  // The hooks a test switched on in this process's environment (kube-control-plane.test.ts), read as the command line reads them.
  const testHooks = testHooksFrom(process.env);
  // As `sluice serve` does: SLUICE_UWS_BUILD, else the newest build that loads.
  await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined);
  const gateway = await startGateway(config, testHooks === undefined ? { logger } : { logger, testHooks });
  const origin = `http://127.0.0.1:${gateway.port}`;
  const firstSlug = config.services[0]!.slug;
  return {
    gateway,
    port: gateway.port,
    origin,
    url: (path, slug = firstSlug) => `${origin}${config.basePath}/${slug}/request${path}`,
    logs,
    logText: () => chunks.join(''),
    close: async () => {
      await gateway.close();
      assertNoSecrets(chunks.join(''));
    },
  };
}

/** The value of one Prometheus sample from the gateway's /metrics, e.g. `sluice_queue_depth{service="svc"}`. */
/** The log lines with message `msg` of a gateway (in this process or a `sluice serve` child). */
export function logged(tg: { logs: readonly Record<string, unknown>[] }, msg: string): Record<string, unknown>[] {
  return tg.logs.filter((line) => line.msg === msg);
}

export async function metric(tg: TestGateway, sample: string): Promise<number | undefined> {
  const text = await (await fetch(`${tg.origin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}

/** Every sample of a Prometheus text, by its full name with labels. */
export function metricSamples(text: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    found.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return found;
}
