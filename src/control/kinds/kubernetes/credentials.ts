// Which Kubernetes API server Sluice talks to, and as whom (docs/configuration.md, `replicas.kubernetes`):
// the kubeconfig file named in the config; else the pod's service account (in-cluster); else
// `$KUBECONFIG`. The token stays inside the client library's KubeConfig: nothing here returns or
// logs it (the tokenFile provider of the in-cluster config also re-reads rotated tokens).
import { existsSync, readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

/** Where the service account of a pod is mounted. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface CredentialOptions {
  /** `replicas.kubernetes.kubeconfig`. */
  kubeconfig?: string | undefined;
  /** `replicas.kubernetes.namespace`. */
  namespace?: string | undefined;
  /** The environment (tests pass their own). */
  env?: NodeJS.ProcessEnv;
  /** Prefix of the service account directory (tests point it at a temporary directory). */
  inClusterPrefix?: string;
}

export interface KubeCredentials {
  kubeConfig: KubeConfig;
  /** The namespace of the Deployment, Service and Lease. */
  namespace: string;
  /** Where the credentials came from, for the start log line (never the credentials themselves). */
  source: 'kubeconfig' | 'in-cluster' | 'KUBECONFIG';
  /** The API server's URL, without userinfo (it is logged). */
  server: string;
}

/** A one-line reason why no credentials could be loaded; `sluice serve` exits 1 with it. */
export class KubeCredentialsError extends Error {
  override readonly name = 'KubeCredentialsError';
}

export function loadCredentials(options: CredentialOptions): KubeCredentials {
  const env = options.env ?? process.env;
  const prefix = options.inClusterPrefix ?? '';
  const kc = new KubeConfig();
  let source: KubeCredentials['source'];
  const tokenFile = `${prefix}${SERVICE_ACCOUNT_DIR}/token`;
  if (options.kubeconfig !== undefined) {
    if (!existsSync(options.kubeconfig)) throw new KubeCredentialsError(`kubeconfig ${options.kubeconfig} does not exist`);
    try {
      kc.loadFromFile(options.kubeconfig);
    } catch (err) {
      throw new KubeCredentialsError(`kubeconfig ${options.kubeconfig} cannot be read: ${(err as Error).message}`);
    }
    source = 'kubeconfig';
  } else if (env['KUBERNETES_SERVICE_HOST'] !== undefined && env['KUBERNETES_SERVICE_PORT'] !== undefined && existsSync(tokenFile)) {
    // loadFromCluster reads the host and port from process.env: hand it ours for the call.
    withEnv(env, () => kc.loadFromCluster(prefix));
    source = 'in-cluster';
  } else if (env['KUBECONFIG'] !== undefined && env['KUBECONFIG'] !== '') {
    const file = env['KUBECONFIG'].split(':').find((f) => f !== '' && existsSync(f));
    if (file === undefined) throw new KubeCredentialsError(`$KUBECONFIG names no file that exists`);
    try {
      kc.loadFromFile(file);
    } catch (err) {
      throw new KubeCredentialsError(`kubeconfig ${file} (from $KUBECONFIG) cannot be read: ${(err as Error).message}`);
    }
    source = 'KUBECONFIG';
  } else {
    throw new KubeCredentialsError(
      'no Kubernetes credentials: set replicas.kubernetes.kubeconfig, run in a pod with a service account, or set $KUBECONFIG',
    );
  }
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new KubeCredentialsError(`the ${source} credentials name no current cluster (current-context: "${kc.getCurrentContext()}")`);
  return { kubeConfig: kc, namespace: pickNamespace(options.namespace, kc, prefix), source, server: withoutUserinfo(cluster.server) };
}

/** The server URL for logs: any `user:password@` taken out. */
function withoutUserinfo(server: string): string {
  try {
    const url = new URL(server);
    if (url.username === '' && url.password === '') return server;
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return '(unparsable server URL)';
  }
}

/** The config's namespace; else the pod's own; else the current context's; else `default`. */
function pickNamespace(configured: string | undefined, kc: KubeConfig, prefix: string): string {
  if (configured !== undefined && configured !== '') return configured;
  const file = `${prefix}${SERVICE_ACCOUNT_DIR}/namespace`;
  if (existsSync(file)) {
    const own = readFileSync(file, 'utf8').trim();
    if (own !== '') return own;
  }
  const context = kc.getContextObject(kc.getCurrentContext());
  if (context?.namespace !== undefined && context.namespace !== '') return context.namespace;
  return 'default';
}

function withEnv(env: NodeJS.ProcessEnv, fn: () => void): void {
  if (env === process.env) {
    fn();
    return;
  }
  const keys = ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT'] as const;
  const saved = keys.map((k) => process.env[k]);
  for (const k of keys) process.env[k] = env[k];
  try {
    fn();
  } finally {
    keys.forEach((k, i) => {
      if (saved[i] === undefined) delete process.env[k];
      else process.env[k] = saved[i];
    });
  }
}
