// The benchmark's child processes (replica, gateways, bare relay), started with an IPC channel.
// Protocol: the child sends `{ type: 'ready', port }` once it listens; the parent sends
// `{ type: 'stop' }` and the child closes and exits. A child exits by itself when the parent
// goes away (IPC `disconnect`), and the parent SIGKILLs whatever is still alive when it exits,
// so no run leaves an orphan behind, even on error or Ctrl-C.
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Child {
  readonly name: string;
  readonly pid: number;
  readonly port: number;
  readonly process: ChildProcess;
  /** Asks the child to close and exit; SIGKILL after `graceMs`. Resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

export interface ChildOptions {
  env?: Record<string, string>;
  /** Node flags for the child (default none: the parent's own flags are not inherited). */
  execArgv?: string[];
  /** Where the child's stdout goes: ignored, inherited, or an open file descriptor. */
  stdout?: 'ignore' | 'inherit' | number;
  readyTimeoutMs?: number;
}

const live = new Set<ChildProcess>();
const exitTasks: (() => void)[] = [];
const started: { name: string; pid: number }[] = [];

/** Every process this run started (name and pid), for the record and the smoke test's check. */
export function startedProcesses(): readonly { name: string; pid: number }[] {
  return started;
}

/** Records a process started elsewhere (a replica the gateway launched) in startedProcesses(). */
export function recordProcess(name: string, pid: number): void {
  started.push({ name, pid });
}

/** Runs `task` (synchronous: remove a temporary file…) when this process exits, however it exits. */
export function atExit(task: () => void): void {
  exitTasks.push(task);
}

function killAll(): void {
  for (const task of exitTasks.splice(0)) {
    try {
      task();
    } catch {
      // best effort
    }
  }
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

let installed = false;

/** Kills every child on exit and on SIGINT/SIGTERM/SIGHUP. Call once, at the start of a run. */
export function installCleanup(): void {
  if (installed) return;
  installed = true;
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      process.stderr.write(`\nbench: ${signal}, stopping children\n`);
      killAll();
      process.exit(130);
    });
  }
}

export async function startChild(name: string, script: URL, options: ChildOptions = {}): Promise<Child> {
  const proc = fork(script, [], {
    env: { ...process.env, ...options.env },
    execArgv: options.execArgv ?? [],
    stdio: ['ignore', options.stdout ?? 'ignore', 'inherit', 'ipc'],
  });
  live.add(proc);
  if (proc.pid !== undefined) started.push({ name, pid: proc.pid });
  proc.once('exit', () => live.delete(proc));
  const timeoutMs = options.readyTimeoutMs ?? 15_000;
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${name}: not ready after ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (m: unknown): void => {
      if (typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'ready') {
        cleanup();
        resolve((m as { port: number }).port);
      }
    };
    const onExit = (code: number | null, signal: string | null): void =>
      fail(new Error(`${name}: exited before it was ready (code ${code}, signal ${signal})`));
    const onError = (err: Error): void => fail(new Error(`${name}: ${err.message}`));
    function cleanup(): void {
      clearTimeout(timer);
      proc.off('message', onMessage);
      proc.off('exit', onExit);
      proc.off('error', onError);
    }
    function fail(err: Error): void {
      cleanup();
      proc.kill('SIGKILL');
      reject(err);
    }
    proc.on('message', onMessage);
    proc.once('exit', onExit);
    proc.once('error', onError);
  });
  return handle(name, proc, port);
}

function handle(name: string, proc: ChildProcess, port: number): Child {
  return {
    name,
    pid: proc.pid!,
    port,
    process: proc,
    async stop(graceMs = 5_000): Promise<number | null> {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      const exited = once(proc, 'exit') as Promise<[number | null, string | null]>;
      if (proc.connected) proc.send({ type: 'stop' });
      else proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      const [code] = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Resolves once something accepts a TCP connection on 127.0.0.1:`port`. */
async function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Starts a program that is not one of ours (nginx, HAProxy, Caddy) on a port chosen by the caller;
 * ready when the port accepts connections. stderr is inherited; `env` is added to the run's;
 * stop() sends SIGTERM (SIGKILL after the grace).
 */
export async function startProgram(name: string, command: string, args: string[], port: number, readyTimeoutMs = 15_000, env: Record<string, string> = {}): Promise<Child> {
  const proc = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } });
  live.add(proc);
  if (proc.pid !== undefined) started.push({ name, pid: proc.pid });
  proc.once('exit', () => live.delete(proc));
  let exited: string | undefined;
  proc.once('exit', (code, signal) => (exited = `exited before it was ready (code ${code}, signal ${signal})`));
  proc.once('error', (err) => (exited = err.message));
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited !== undefined) throw new Error(`${name}: ${exited}`);
    if (await acceptsConnections(port)) return handle(name, proc, port);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`${name}: not accepting connections on port ${port} after ${readyTimeoutMs} ms`);
    }
    await sleep(20);
  }
}
