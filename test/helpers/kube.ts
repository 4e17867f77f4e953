// Helpers for the Kubernetes source tests: a fake API server with a kubeconfig that points at it,
// and sources (the real client library inside) whose log lines are captured.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import {
  type KubernetesReplicaSettings,
  KubernetesReplicaSource,
  type KubernetesTarget,
  type KubernetesTuning,
} from '../../src/control/kinds/kubernetes/kubernetes-source.js';
import { createLogger } from '../../src/log/logger.js';
import { FakeKubeApi, type FakeKubeOptions } from '../fixtures/fake-kube-api.js';

/** The service account token of the tests: it must never appear in a log line. */
export const KUBE_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.sluice-test-service-account-token.c2VjcmV0LXNpZ25hdHVyZQ';
export const NS = 'models';

export async function startFakeKube(options: Omit<FakeKubeOptions, 'token'> = {}): Promise<FakeKubeApi> {
  const api = new FakeKubeApi({ token: KUBE_TOKEN, ...options });
  await api.start();
  return api;
}

/** A kubeconfig file for `url` with the test token (and a context namespace that is not NS). */
export function writeKubeconfig(url: string, token = KUBE_TOKEN): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-kube-'));
  const file = join(dir, 'kubeconfig');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: fake\n  cluster:\n    server: ${url}\n    insecure-skip-tls-verify: true`,
      'users:',
      `- name: sluice\n  user:\n    token: ${token}`,
      'contexts:',
      '- name: fake\n  context:\n    cluster: fake\n    user: sluice\n    namespace: elsewhere',
      'current-context: fake',
      '',
    ].join('\n'),
  );
  return file;
}

export interface CapturedLog {
  lines: Record<string, unknown>[];
  text(): string;
}

export function captureLogger(level = 'debug'): { logger: ReturnType<typeof createLogger>; log: CapturedLog } {
  const chunks: string[] = [];
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      const text = chunk.toString();
      chunks.push(text);
      for (const line of text.split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  return { logger: createLogger(level, sink), log: { lines, text: () => chunks.join('') } };
}

/** Timings short enough for tests. */
export const FAST: Partial<KubernetesTuning> = {
  backoffBaseMs: 20,
  backoffMaxMs: 200,
  watchTimeoutSeconds: 30,
  watchStallMs: 10_000,
  probeIntervalMs: 20,
  probeTimeoutMs: 1_000,
  scaleCacheMs: 0,
};

export interface SourceSetup {
  target?: Partial<KubernetesTarget>;
  replicas?: Partial<KubernetesReplicaSettings>;
  tuning?: Partial<KubernetesTuning>;
  gatewayId?: string;
}

export function newSource(kubeconfig: string, setup: SourceSetup = {}): { source: KubernetesReplicaSource; log: CapturedLog } {
  const { logger, log } = captureLogger();
  const source = new KubernetesReplicaSource({
    slug: 'llama',
    kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig, ...setup.target },
    replicas: { min: 0, max: 3, idleTimeoutMs: 60_000, concurrency: 0, ...setup.replicas },
    logger,
    gatewayId: setup.gatewayId ?? 'gw-test',
    tuning: { ...FAST, ...setup.tuning },
  });
  return { source, log };
}

/** An EndpointSlice of service `llama` with one endpoint per `[address, ready, terminating?]`. */
export function slice(name: string, port: number, endpoints: [string, boolean | null, boolean?][]): Record<string, unknown> & { metadata: Record<string, unknown> } {
  return {
    metadata: { name, namespace: NS, labels: { 'kubernetes.io/service-name': 'llama' } },
    addressType: 'IPv4',
    endpoints: endpoints.map(([address, ready, terminating]) => ({
      addresses: [address],
      conditions: { ready, serving: ready, terminating: terminating ?? false },
      targetRef: { kind: 'Pod', name: `pod-${address}-${port}` },
    })),
    ports: [{ name: 'http', port, protocol: 'TCP' }],
  };
}

/** Stops every source a test started and checks that none logged the credential; empties `sources`. */
export async function stopSources(sources: { source: KubernetesReplicaSource; log: CapturedLog }[]): Promise<void> {
  await Promise.all(
    sources.splice(0).map(async ({ source, log }) => {
      await source.stop();
      assert.ok(!log.text().includes(KUBE_TOKEN), 'no credential in any log line');
    }),
  );
}
