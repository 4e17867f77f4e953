// Helpers for the worker-thread tests: the gateway as a child process (`sluice serve`), and
// keep-alive connections whose serving worker is known (from the `worker` field of the log line
// of a first, refused request on each).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { eventually } from './wait.js';

export const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));
export const GATE_REPLICA = fileURLToPath(new URL('../fixtures/gate-replica.js', import.meta.url));

/** Where log lines come from: an in-process gateway's capture or a child's stdout. */
export interface LogSource {
  logs: Record<string, unknown>[];
}

export interface CliGateway extends LogSource {
  child: ChildProcess;
  port: number;
  origin: string;
  configFile: string;
  /** stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  url(path: string, slug: string): string;
}

/** Runs `sluice serve` with `config` (listen port 0 unless given) and waits until it listens. */
export async function startCliGateway(config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<CliGateway> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-workers-'));
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, ...config }));
  const child = spawn(process.execPath, [CLI, 'serve', '--config', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let text = '';
  let partial = '';
  const logs: Record<string, unknown>[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    text += d.toString();
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.startsWith('{')) logs.push(JSON.parse(line) as Record<string, unknown>);
  });
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // A gateway that does not say it listens (its log level hides the line, or it hangs) is killed
  // here: the caller gets no handle to stop it with.
  await eventually(() => logs.some((l) => l.msg === 'gateway listening') || child.exitCode !== null, 60_000, 'the gateway to listen').catch(() => undefined);
  const listening = logs.find((l) => l.msg === 'gateway listening');
  if (listening === undefined) {
    if (child.exitCode === null) child.kill('SIGKILL');
    throw new Error(`the gateway did not start: ${text}`);
  }
  const port = Number(listening.port);
  const origin = `http://127.0.0.1:${port}`;
  return {
    child,
    port,
    origin,
    configFile,
    logs,
    output: () => text,
    exited,
    url: (path, slug) => `${origin}/api/v1/services/${slug}/request${path}`,
  };
}

export interface WorkerConnection {
  client: Client;
  worker: number;
}

/** The worker that logged the line of request `reqId`. */
export async function workerOf(source: LogSource, reqId: string): Promise<number> {
  let worker: unknown;
  await eventually(() => (worker = source.logs.find((l) => l.reqId === reqId)?.worker) !== undefined, 10_000, `the log line of ${reqId}`);
  return Number(worker);
}

/**
 * Opens keep-alive connections until at least `perWorker` are served by each of `workers`
 * workers; returns those (the others are closed).
 */
export async function connectionsOnEveryWorker(source: LogSource, origin: string, workers: number, perWorker: number): Promise<WorkerConnection[][]> {
  const byWorker: WorkerConnection[][] = Array.from({ length: workers }, () => []);
  // `workers: 1`: every connection reaches the one thread (whose log lines name no worker).
  if (workers === 1) for (let i = 0; i < perWorker; i++) byWorker[0]!.push({ client: keptClient(origin), worker: 0 });
  for (let i = 0; i < 200 && byWorker.some((list) => list.length < perWorker); i++) {
    // undici closes a keep-alive connection idle for 4 s by default and silently opens a new one
    // on the next request, which may reach another worker: on a slow machine the first
    // connections wait that long for the others. Keep them (uWS closes idle ones after 10 s).
    const client = keptClient(origin);
    const res = await client.request({ path: '/api/v1/services/no-such-service/request/x', method: 'POST', body: '' });
    await res.body.dump();
    const worker = await workerOf(source, String(res.headers['x-request-id']));
    const list = byWorker[worker]!;
    if (list.length < perWorker) list.push({ client, worker });
    else await client.close();
  }
  if (byWorker.some((list) => list.length < perWorker)) throw new Error('could not reach every worker');
  return byWorker;
}

function keptClient(origin: string): Client {
  return new Client(origin, { pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 30_000 });
}

/** Total CPU ticks (user + system) per thread of process `pid`, from /proc/<pid>/task/<tid>/stat. */
export async function threadTicks(pid: number): Promise<Map<number, number>> {
  const { readdirSync, readFileSync } = await import('node:fs');
  const ticks = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which may contain spaces) start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(Number(tid), Number(fields[11]) + Number(fields[12]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return ticks;
}
