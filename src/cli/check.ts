// `sluice check --config FILE`: exit 0 with the number of services (routers, pools), what each
// router and pool holds, and any warnings, or 1 with every problem listed.
import type { Config } from '../config/types.js';
import { expiryWarnings, readCertificateDates } from '../config/certificate-expiry.js';
import { tlsWarnings } from '../config/tls.js';
import { summaryLines } from '../config/summary.js';
import { loadOrReport } from './config-file.js';

export async function check(file: string, env: NodeJS.ProcessEnv): Promise<number> {
  const config = loadOrReport(file, env);
  if (config === undefined) return 1;
  const n = config.services.length;
  const routers = config.routers?.length ?? 0;
  const pools = config.pools.length;
  const counts = [`${n} ${n === 1 ? 'service' : 'services'}`];
  if (routers > 0) counts.push(`${routers} ${routers === 1 ? 'router' : 'routers'}`);
  if (pools > 0) counts.push(`${pools} ${pools === 1 ? 'pool' : 'pools'}`);
  process.stdout.write(`config OK: ${counts.join(', ')}\n`);
  for (const line of summaryLines(config)) process.stdout.write(`${line}\n`);
  const routedOnly = config.services.filter((s) => s.tokens.length === 0).map((s) => s.slug);
  if (routedOnly.length > 0) process.stdout.write(`reachable only through routers (no tokens of their own): ${routedOnly.join(', ')}\n`);
  if (config.listen.tls !== undefined) for (const warning of tlsWarnings(config.listen.tls)) process.stdout.write(`warning: ${warning}\n`);
  for (const warning of storeCertificateWarnings(config)) process.stdout.write(`warning: ${warning}\n`);
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
  const { loadCredentials, KubeCredentialsError } = await import('../control/kinds/kubernetes/credentials.js');
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

/** The limit store's CA and client certificate, as the running gateway warns about them (only with rediss://: the config refuses them otherwise). */
function storeCertificateWarnings(config: Config): string[] {
  const { storeCaFile, storeCertFile } = config.limits;
  return [
    ...(storeCaFile === undefined ? [] : expiryWarnings(`limits.storeCaFile ${storeCaFile}`, readCertificateDates(storeCaFile))),
    ...(storeCertFile === undefined ? [] : expiryWarnings(`limits.storeCertFile ${storeCertFile}`, readCertificateDates(storeCertFile))),
  ];
}
