// Launched replicas: one child process per replica, on a free local port.
//
// - `{units}` (a service with `replicas.pool`): the indices of the pool units the replica holds,
//   comma-separated, in the arguments and the env values (`CUDA_VISIBLE_DEVICES: "{units}"`).
// - The port: listen on port 0 with node:net, read the port the kernel chose, close, and pass it
//   as `PORT` (and `{port}` in the arguments). A port handed out in the last minute is not handed
//   out again. Another program may still take it first; the replica then fails to bind, exits,
//   and the set retries after its backoff.
// - No shell, `detached: false`: the child is in the gateway's process group.
// - stdout and stderr are read line by line into the logger (stdout at debug, stderr at info),
//   so the pipes never fill; the last lines are kept for the log line of a failed start.
// - No orphans: `stop()` sends SIGTERM, then SIGKILL after a grace, and resolves on exit; and if
//   the gateway process exits with children still running, a synchronous 'exit' handler
//   SIGKILLs them. (A gateway killed by SIGKILL cannot do that; nothing in Node can.)
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import type { Logger } from '../../log/logger.js';

/** Lines longer than this are cut (the rest of the line is dropped). */
const REPLICA_LOG_LINE_CHARS = 8 * 1024;

/** Lines kept for the log of a failed start. */
const REPLICA_RECENT_LINES = 20;

/** After the process exits, how long to wait for the rest of its output. */
const REPLICA_STDIO_DRAIN_MS = 100;

/** A port handed out is not handed out again for this long. */
const PORT_QUARANTINE_MS = 60_000;

export interface ProcessExit {
  /** Exit code, or null when killed by a signal or never spawned. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be spawned (ENOENT, EACCES, ...). */
  error?: Error;
}

export interface ReplicaProcess {
  /** undefined when spawning failed. */
  readonly pid: number | undefined;
  /** Resolves once, when the process has exited (or failed to spawn). */
  readonly exited: Promise<ProcessExit>;
  /** True once `exited` has resolved. */
  readonly hasExited: boolean;
  /** SIGTERM now, SIGKILL after `graceMs` if still running; resolves on exit. Idempotent. */
  stop(graceMs: number): Promise<ProcessExit>;
  /** The last lines of stdout and stderr, oldest first (for the log line of a failure). */
  recentOutput(): string[];
}

export interface SpawnReplicaOptions {
  command: readonly string[];
  env: Record<string, string>;
  port: number;
  /** The pool units it holds, comma-separated (`{units}` in the arguments and env values); undefined: no pool. */
  units?: string | undefined;
  logger: Logger;
  service: string;
  replica: string;
  /** Called once, synchronously from the child's 'exit' (or spawn 'error') event. */
  onExit(exit: ProcessExit): void;
}

const recentPorts = new Map<number, number>();

/** A free TCP port on `host`, found by listening on port 0 and closing. */
export async function findFreePort(host = '127.0.0.1'): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.unref();
      server.once('error', reject);
      server.listen({ host, port: 0, exclusive: true }, () => {
        const address = server.address();
        const chosen = typeof address === 'object' && address !== null ? address.port : 0;
        server.close(() => resolve(chosen));
      });
    });
    const now = Date.now();
    for (const [p, at] of recentPorts) if (now - at > PORT_QUARANTINE_MS) recentPorts.delete(p);
    if (!recentPorts.has(port) || attempt >= 10) {
      recentPorts.set(port, now);
      return port;
    }
  }
}

/** Children still running, SIGKILLed if the gateway process exits before stopping them. */
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function killLiveChildren(): void {
  for (const child of liveChildren) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

export function spawnReplica(options: SpawnReplicaOptions): ReplicaProcess {
  const { command, logger, service, replica } = options;
  const portText = String(options.port);
  const file = command[0];
  if (file === undefined) throw new Error('replicas.command is empty');
  const units = options.units;
  const args = command.slice(1).map((arg) => {
    const withPort = arg.replaceAll('{port}', portText);
    return units === undefined ? withPort : withPort.replaceAll('{units}', units);
  });
  const own = units === undefined ? options.env : Object.fromEntries(Object.entries(options.env).map(([name, value]) => [name, value.replaceAll('{units}', units)]));
  const env: NodeJS.ProcessEnv = { ...process.env, ...own, PORT: portText };

  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', killLiveChildren);
  }

  const recent: string[] = [];
  let exitInfo: ProcessExit | undefined;
  let resolveExited!: (exit: ProcessExit) => void;
  const exited = new Promise<ProcessExit>((resolve) => (resolveExited = resolve));
  let killTimer: NodeJS.Timeout | undefined;

  const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: false, shell: false });
  if (child.pid !== undefined) liveChildren.add(child);

  const finish = (exit: ProcessExit): void => {
    if (exitInfo !== undefined) return;
    exitInfo = exit;
    liveChildren.delete(child);
    if (killTimer !== undefined) clearTimeout(killTimer);
    options.onExit(exit);
    resolveExited(exit);
  };
  child.once('exit', (code, signal) => {
    liveChildren.delete(child);
    // 'close' follows once stdout and stderr have ended: waiting for it (briefly: a grandchild
    // may hold the pipes open) lets the last lines of output reach the log of a failure.
    const late = setTimeout(() => finish({ code, signal }), REPLICA_STDIO_DRAIN_MS);
    child.once('close', () => {
      clearTimeout(late);
      finish({ code, signal });
    });
  });
  child.on('error', (error) => {
    // Spawning failed (no 'exit' follows), or a later kill() failed (the process is gone anyway).
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) {
      finish({ code: child.exitCode, signal: child.signalCode, error });
    } else {
      logger.warn({ service, replica, err: error }, 'replica process error');
    }
  });

  const keep = (line: string): void => {
    if (recent.length >= REPLICA_RECENT_LINES) recent.shift();
    recent.push(line);
  };
  readLines(child.stdout, (line) => {
    keep(line);
    logger.debug({ service, replica, stream: 'stdout', line }, 'replica output');
  });
  readLines(child.stderr, (line) => {
    keep(line);
    logger.info({ service, replica, stream: 'stderr', line }, 'replica output');
  });

  const handle: ReplicaProcess = {
    pid: child.pid,
    exited,
    get hasExited() {
      return exitInfo !== undefined;
    },
    stop(graceMs: number): Promise<ProcessExit> {
      if (exitInfo === undefined && killTimer === undefined) {
        child.kill('SIGTERM');
        killTimer = setTimeout(() => {
          if (exitInfo === undefined) {
            logger.warn({ service, replica, pid: child.pid, graceMs }, 'replica ignored SIGTERM; sending SIGKILL');
            child.kill('SIGKILL');
          }
        }, graceMs);
      }
      return exited;
    },
    recentOutput(): string[] {
      return recent.slice();
    },
  };
  return handle;
}

/** Calls `onLine` for each line of the stream (without the newline), reading it to the end. */
function readLines(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void): void {
  if (stream === null) return;
  stream.setEncoding('utf8');
  let partial = '';
  let cut = false;
  stream.on('data', (chunk: string) => {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf('\n', start);
      if (nl === -1) break;
      const piece = chunk.slice(start, nl);
      if (!cut) onLine(trimCr(partial + piece).slice(0, REPLICA_LOG_LINE_CHARS));
      partial = '';
      cut = false;
      start = nl + 1;
    }
    if (start < chunk.length && !cut) {
      partial += chunk.slice(start);
      if (partial.length > REPLICA_LOG_LINE_CHARS) {
        onLine(partial.slice(0, REPLICA_LOG_LINE_CHARS));
        partial = '';
        cut = true;
      }
    }
  });
  stream.on('end', () => {
    if (partial.length > 0 && !cut) onLine(trimCr(partial));
    partial = '';
  });
  stream.on('error', () => {
    // The pipe broke because the process died; its exit is reported by the 'exit' event.
  });
}

function trimCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}
