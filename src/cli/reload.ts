// `SIGHUP`: read the config again and apply its tokens, the services' models, the routers and tracing
// without dropping a connection (a router's models on services that start only with a restart
// wait for it). Anything else that changed is logged and applied at the next start; a renewed TLS
// certificate too (uWS cannot swap the certificate of a listening app).
import { ConfigError, formatProblem } from '../config/load.js';
import { tlsFingerprint } from '../config/tls.js';
import type { Config } from '../config/types.js';
import type { Gateway } from '../gateway/gateway.js';
import type { Logger } from '../log/logger.js';

/**
 * Applies the tokens of `load()` to `gateway`; returns the config now running (`current` when the
 * file cannot be read or is invalid: every problem is logged and nothing changes).
 */
export function reloadTokens(gateway: Gateway, current: Config, load: () => Config, file: string, servedTls: string | undefined, logger: Logger): Config {
  let next: Config;
  try {
    next = load();
  } catch (err) {
    if (err instanceof ConfigError) {
      logger.error({ file, reason: err.summary, problems: err.problems.map(formatProblem) }, 'config reload failed, keeping the running config');
    } else {
      logger.error({ file, err }, 'config reload failed, keeping the running config');
    }
    return current;
  }
  try {
    gateway.reload(next);
  } catch (err) {
    logger.error({ file, err }, 'config reload failed, keeping the running config');
    return current;
  }
  logger.info({ file, services: next.services.length }, 'config reloaded');
  const needRestart = changesBeyondTokens(current, next);
  if (needRestart.length > 0) logger.warn({ keys: needRestart }, 'config changes other than tokens take effect on restart');
  const tls = next.listen.tls;
  if (tls !== undefined && servedTls !== undefined && tlsFingerprint(tls) !== servedTls) {
    logger.warn({ certFile: tls.certFile, keyFile: tls.keyFile }, 'TLS certificate not reloaded: the files changed, restart to serve them');
  }
  return next;
}

/** Keys whose values differ between two configs, ignoring tokens, services' limits and models, and routers (what a reload applies). */
function changesBeyondTokens(before: Config, after: Config): string[] {
  const changed: string[] = [];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)] as (keyof Config)[]);
  for (const key of keys) {
    // Tracing is applied by the reload too (each data plane's Tracer: data/data-plane.ts).
    if (key === 'services' || key === 'routers' || key === 'tracing') continue;
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) changed.push(key);
  }
  const withoutTokens = (c: Config): Map<string, string> =>
    new Map(c.services.map((s) => [s.slug, JSON.stringify({ ...s, tokens: undefined, limits: undefined, models: undefined })]));
  const a = withoutTokens(before);
  const b = withoutTokens(after);
  for (const slug of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(slug) !== b.get(slug)) changed.push(`services[${slug}]`);
  }
  return changed;
}
