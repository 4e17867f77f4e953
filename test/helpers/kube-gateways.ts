// Gateway-level Kubernetes tests (issue 10): the fake API server and the controller simulator run
// in the test process; every gateway is a real `sluice serve` process with `replicas.kubernetes`
// pointing at them through a kubeconfig. `close()` checks what every test must hold: no call
// outside docs/kubernetes.md, no credential in any gateway's output, no replica process left.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import type { KubernetesTuning } from '../../src/control/kinds/kubernetes/kubernetes-source.js';
import type { FakeKubeApi, FakeKubeOptions, KubeRequest } from '../fixtures/fake-kube-api.js';
import { KubeControllerSim } from '../fixtures/kube-controller-sim.js';
import { pidAlive } from '../fixtures/replica-harness.js';
import { assertNoSecrets, AUTH, secret, TEST_TOKEN_SHA256 } from './gateway.js';
import { FAST, KUBE_TOKEN, NS, startFakeKube, writeKubeconfig } from './kube.js';
import { type TaggedReplica, startTaggedReplica } from './tagged-replica.js';
import { CLI, type CliGateway, startCliGateway } from './workers.js';
import { eventually } from './wait.js';

secret(KUBE_TOKEN);

/** The environment that lets a gateway read SLUICE_TEST_KUBE_TUNING (test builds only). */
export const KUBE_TEST_ENV: NodeJS.ProcessEnv = {
  NODE_ENV: 'test',
  SLUICE_TEST_HOOKS: '1',
  SLUICE_TEST_KUBE_TUNING: JSON.stringify(FAST),
};

export interface ServiceSetup {
  /** Slug, Deployment and Service name (default `llama`). */
  name?: string;
  /** `replicas` settings besides `kubernetes` (min 0, max 2, idleTimeoutMs 60 s, concurrency 0). */
  replicas?: Record<string, unknown>;
  queue?: Record<string, unknown>;
}

export interface GatewaySetup {
  workers?: number;
  services?: ServiceSetup[];
  /** Overrides the kubeconfig of every service. */
  kubeconfig?: string;
  /** Kubernetes timings besides FAST (SLUICE_TEST_KUBE_TUNING). */
  tuning?: Partial<KubernetesTuning>;
  /** Default 5 s. */
  drainTimeoutMs?: number;
  /** Default info; debug shows every retry of a failing API call (`kubernetes API call failed again`). */
  logLevel?: 'debug' | 'info';
}

export interface KubeGateway extends CliGateway {
  /** `<hostname>-<pid>`: this process's Lease holder id. */
  identity: string;
  /** Log lines with message `msg`. */
  lines(msg: string): Record<string, unknown>[];
}

/** Successful writes to a Deployment's Scale: raises are patches, the idle lower an update. */
export function scaleWrites(api: FakeKubeApi, verb: 'patch' | 'update', deployment = 'llama'): KubeRequest[] {
  return api.requests.filter(
    (r) => r.resource === 'deployments/scale' && r.verb === verb && r.status === 200 && r.path.includes(`/deployments/${deployment}/`),
  );
}

export class KubeCluster {
  readonly gateways: KubeGateway[] = [];
  readonly replicas: TaggedReplica[] = [];
  readonly sims = new Map<string, KubeControllerSim>();
  private readonly agent = new Agent({ connections: 64 });

  private constructor(
    readonly api: FakeKubeApi,
    readonly kubeconfig: string,
  ) {}

  /**
   * The API server with one Deployment at 0 per name, each with its controller simulator (its pods
   * run `command`, the model server by default). It sends
   * a bookmark to every watch each `bookmarkEveryMs` (default 200; 0: only on `api.bookmark()`, as
   * a real API server that sends them about once a minute looks to a test); `options` are the
   * API server's (FakeKubeOptions).
   */
  static async start(deployments: { name?: string; env?: Record<string, string>; command?: string[] }[] = [{}], options: Omit<FakeKubeOptions, 'token'> = {}): Promise<KubeCluster> {
    const api = await startFakeKube({ ...options, bookmarkEveryMs: options.bookmarkEveryMs ?? 200 });
    const cluster = new KubeCluster(api, writeKubeconfig(api.url));
    for (const d of deployments) {
      const name = d.name ?? 'llama';
      api.addDeployment(NS, name, 0);
      const sim = new KubeControllerSim(api, { namespace: NS, deployment: name, service: name, env: d.env ?? {}, ...(d.command === undefined ? {} : { command: d.command }) });
      cluster.sims.set(name, sim);
    }
    return cluster;
  }

  sim(name = 'llama'): KubeControllerSim {
    const sim = this.sims.get(name);
    if (sim === undefined) throw new Error(`no simulator for ${name}`);
    return sim;
  }

  /** The config of `sluice serve` for these services. */
  config(setup: GatewaySetup = {}): Record<string, unknown> {
    const services = (setup.services ?? [{}]).map((s) => {
      const name = s.name ?? 'llama';
      return {
        slug: name,
        tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }],
        ...(s.queue === undefined ? {} : { queue: s.queue }),
        replicas: {
          kubernetes: { namespace: NS, deployment: name, service: name, port: 'http', kubeconfig: setup.kubeconfig ?? this.kubeconfig },
          min: 0,
          max: 2,
          idleTimeoutMs: 60_000,
          concurrency: 0,
          ...s.replicas,
        },
      };
    });
    return { workers: setup.workers ?? 1, drainTimeoutMs: setup.drainTimeoutMs ?? 5_000, log: { level: setup.logLevel ?? 'info' }, services };
  }

  /** Starts a gateway process and waits until its sources have started watching. */
  gateway(setup: GatewaySetup = {}): Promise<KubeGateway> {
    return this.gatewayFromConfig(this.config(setup), setup.tuning);
  }

  /** Starts a gateway process with `config` (from `config()`, perhaps changed by the test). */
  async gatewayFromConfig(config: Record<string, unknown>, tuning?: Partial<KubernetesTuning>): Promise<KubeGateway> {
    const env = tuning === undefined ? KUBE_TEST_ENV : { ...KUBE_TEST_ENV, SLUICE_TEST_KUBE_TUNING: JSON.stringify({ ...FAST, ...tuning }) };
    const cli = await startCliGateway(config, env);
    const gw: KubeGateway = {
      ...cli,
      identity: `${hostname()}-${cli.child.pid}`,
      lines: (msg) => cli.logs.filter((l) => l.msg === msg),
    };
    this.gateways.push(gw);
    const sources = (config['services'] as unknown[]).length;
    await eventually(() => gw.lines('kubernetes replica source started').length === sources, 10_000, 'the kubernetes sources to start');
    return gw;
  }

  /** `n` gateways, started together (the first one with `first`'s setup). */
  gatewayGroup(n: number, setup: GatewaySetup = {}, first: GatewaySetup = setup): Promise<KubeGateway[]> {
    return Promise.all(Array.from({ length: n }, (_, i) => this.gateway(i === 0 ? first : setup)));
  }

  /** A replica the test runs, published as an endpoint of `service` (ready unless told). */
  async hpaPod(podName: string, options: { service?: string; ready?: boolean; publish?: boolean } = {}): Promise<TaggedReplica> {
    const replica = await startTaggedReplica(podName);
    this.replicas.push(replica);
    if (options.publish !== false) this.publish(replica, options.service, options.ready);
    return replica;
  }

  /** Publishes the endpoint of a pod `hpaPod` started (at once, in this tick). */
  publish(replica: TaggedReplica, service = 'llama', ready = true): void {
    this.sim(service).addEndpoint(replica.name, replica.port, ready);
  }

  /** Rewrites the endpoint of a pod `hpaPod` published: terminating (ready false, serving true). */
  markTerminating(replica: TaggedReplica, service = 'llama'): void {
    this.setConditions(replica, { ready: false, serving: true, terminating: true }, service);
  }

  /** Rewrites the conditions of the endpoint of a pod `hpaPod` published (a readiness change). */
  setConditions(replica: TaggedReplica, conditions: { ready: boolean; serving: boolean; terminating: boolean }, service = 'llama'): void {
    const name = `${service}-${replica.name}`;
    const slice = this.api.endpointSlice(NS, name);
    if (slice === undefined) throw new Error(`no endpoint slice ${name}`);
    const endpoints = slice['endpoints'] as { conditions: Record<string, boolean> }[];
    for (const ep of endpoints) ep.conditions = { ...conditions };
    this.api.putEndpointSlice(slice);
  }

  /** Whether gateway `gw` logged endpoint `pod` as routable (ready, not terminating). */
  static sawReady(gw: KubeGateway, pod: string): boolean {
    return gw.lines('kubernetes endpoint').some((l) => l.pod === pod && l.ready === true && l.terminating !== true);
  }

  static sawTerminating(gw: KubeGateway, pod: string): boolean {
    return gw.lines('kubernetes endpoint').some((l) => l.pod === pod && l.terminating === true);
  }

  static sawGone(gw: KubeGateway, pod: string): boolean {
    return gw.lines('kubernetes endpoint').some((l) => l.pod === pod && l.gone === true);
  }

  /** POST `path` of service `slug` through `gw`; the whole answer. */
  async post(gw: KubeGateway, path: string, body: unknown = {}, slug = 'llama'): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
    const res = await request(gw.url(path, slug), {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher: this.agent,
    });
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  }

  /** A chat completion of the model server through `gw`, streamed; the reply text and the raw body. */
  async chat(gw: KubeGateway, words: string[], slug = 'llama'): Promise<{ status: number; contentType: string; reply: string; done: boolean; raw: string }> {
    const res = await this.post(gw, '/v1/chat/completions', { model: 'demo', stream: true, max_tokens: words.length + 2, messages: [{ role: 'user', content: words.join(' ') }] }, slug);
    return { status: res.status, contentType: String(res.headers['content-type'] ?? ''), ...parseChatStream(res.text), raw: res.text };
  }

  /** Opens a streamed request through `gw` and returns it before its body ends. */
  async open(gw: KubeGateway, path: string, body: unknown = {}, slug = 'llama'): Promise<{ status: number; chunks: AsyncIterable<Buffer>; text(): Promise<string> }> {
    const res = await request(gw.url(path, slug), {
      method: 'POST',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher: this.agent,
    });
    return { status: res.statusCode, chunks: res.body, text: () => res.body.text() };
  }

  /**
   * Stops everything and checks what every test must hold: no call outside the Role (docs/kubernetes.md#the-role), no
   * credential in any gateway's output, no replica process left running.
   */
  async close(): Promise<void> {
    const problems: unknown[] = [];
    for (const gw of this.gateways) {
      const killedByTest = gw.child.exitCode !== null || gw.child.signalCode !== null;
      const stop = await stopProcess(gw.child, gw.exited);
      // A gateway stops cleanly on SIGTERM, its watches and Lease timers included.
      if (!killedByTest && (stop.forced || stop.code !== 0)) {
        problems.push(new Error(`gateway ${String(gw.child.pid)} did not exit cleanly on SIGTERM (code ${String(stop.code)}${stop.forced ? ', SIGKILLed' : ''}): ${gw.output().slice(-2000)}`));
      }
      try {
        assert.ok(!gw.output().includes(KUBE_TOKEN), 'the service account token appeared in a gateway output');
        assertNoSecrets(gw.output(), 'the gateway output');
      } catch (err) {
        problems.push(err);
      }
    }
    for (const r of this.replicas) await r.close();
    for (const sim of this.sims.values()) await sim.close();
    await this.api.close();
    await this.agent.close();
    const pods = [...this.sims.values()].flatMap((s) => s.started);
    const alive = pods.filter((p) => p.pid !== undefined && pidAlive(p.pid));
    if (alive.length > 0) problems.push(new Error(`model-server processes left running: ${alive.map((p) => p.pid).join(', ')}`));
    const forbidden = this.api.forbiddenCalls();
    if (forbidden.length > 0) problems.push(new Error(`calls outside docs/kubernetes.md: ${JSON.stringify(forbidden)}`));
    if (problems.length > 0) throw problems[0];
  }
}

/** SIGTERM, then SIGKILL if the process has not exited after its drain; how it ended. */
export async function stopProcess(child: ChildProcess, exited: Promise<number | null>): Promise<{ code: number | null; forced: boolean }> {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, forced: false };
  let forced = false;
  child.kill('SIGTERM');
  const killer = setTimeout(() => {
    forced = true;
    child.kill('SIGKILL');
  }, 15_000);
  const code = await exited;
  clearTimeout(killer);
  return { code, forced };
}

/** The text of a streamed chat completion (server-sent events) and whether it ended with [DONE]. */
export function parseChatStream(raw: string): { reply: string; done: boolean } {
  let reply = '';
  let done = false;
  for (const event of raw.split('\n\n')) {
    const data = event.split('\n').find((l) => l.startsWith('data: '))?.slice('data: '.length);
    if (data === undefined) continue;
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    const chunk = JSON.parse(data) as { choices: { delta: { content?: string } }[] };
    reply += chunk.choices[0]?.delta.content ?? '';
  }
  return { reply, done };
}

/** Runs `sluice serve` with `config` to its exit (for configs that must fail at start). */
export async function runServeToExit(config: Record<string, unknown>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-kube-'));
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, ...config }));
  const child = spawn(process.execPath, [CLI, 'serve', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...KUBE_TEST_ENV } });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    // A gateway that starts although it must not: stop it, the test sees a code that is not 1.
    if (stdout.includes('gateway listening')) child.kill('SIGKILL');
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  return { code, stdout, stderr };
}
