// The gateway as a child process (`sluice serve`), for tests that watch the process itself:
// its file descriptors and memory (/proc/<pid>), signals, and its exit code.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertNoSecrets } from './gateway.js';
import { closedPort } from './replica.js';
import { eventually } from './wait.js';

const CLI = fileURLToPath(new URL('../../src/cli.js', import.meta.url));

export interface GatewayProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  adminPort: number | undefined;
  /** `http://127.0.0.1:PORT/api/v1/services/SLUG/request` */
  base(slug: string): string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  /** SIGKILLs the process if it still runs, and checks its log held no token. */
  stop(): Promise<void>;
}

/**
 * Starts `sluice serve` with `config` (listen port and, if `admin` is true, the admin listener
 * filled in). `nodeArgs` go to node before the CLI (`--import` a fixture), `env` adds to the process's.
 */
export async function startGatewayProcess(config: Record<string, unknown>, options: { admin?: boolean; nodeArgs?: string[]; env?: Record<string, string> } = {}): Promise<GatewayProcess> {
  const port = await closedPort();
  const adminPort = options.admin === true ? await closedPort() : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'sluice-proc-'));
  const configFile = join(dir, 'config.json');
  const full = { ...config, listen: { host: '127.0.0.1', port }, ...(adminPort === undefined ? {} : { admin: { host: '127.0.0.1', port: adminPort } }) };
  writeFileSync(configFile, JSON.stringify(full));
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), CLI, 'serve', '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...options.env } });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await eventually(() => output.includes('gateway listening') || child.exitCode !== null, 15_000, 'the gateway to listen');
  if (child.exitCode !== null) throw new Error(`the gateway exited at start: ${output}`);
  return {
    child,
    pid: child.pid!,
    port,
    adminPort,
    base: (slug) => `http://127.0.0.1:${port}/api/v1/services/${slug}/request`,
    output: () => output,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      assertNoSecrets(output, 'the gateway process output');
    },
  };
}

/** Open file descriptors of a process. */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Resident set size of a process, in bytes. */
export function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? 0 : Number(match[1]) * 1024;
}
