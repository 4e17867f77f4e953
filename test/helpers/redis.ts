// A real redis-server for the shared limit store's tests (docs/architecture.md#the-shared-store):
// Debian's package, started by the test itself on a free port, in a temp dir, without persistence
// (`--save '' --appendonly no`). In CI (CI=true) a missing redis-server fails the test (.ci/run
// installs it: .ci/install-redis); elsewhere the tests skip with REDIS_SKIP's message.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './wait.js';

const BIN = process.env['REDIS_SERVER'] ?? 'redis-server';
const IN_CI = process.env['CI'] === 'true' || process.env['CI'] === '1';
const HAVE_REDIS = spawnSync(BIN, ['--version'], { stdio: 'ignore' }).status === 0;

/** `test(name, { skip: REDIS_SKIP }, …)`: false in CI (then `startRedis` fails when it is missing). */
export const REDIS_SKIP: string | false = !HAVE_REDIS && !IN_CI ? `no ${BIN}: apt-get install redis-server (or run .ci/install-redis)` : false;

/** Who may use the server: a password of the `default` user (`requirepass`), and ACL users. */
export interface RedisAuth {
  /** The `default` user's password (none: the default user needs none). */
  password?: string;
  /** ACL users, each as an aclfile line after `user ` (`sluice on >secret ~sluice:* +eval +ping`). */
  users?: string[];
}

export interface TestRedis {
  port: number;
  /** `redis://127.0.0.1:PORT` */
  url: string;
  /** Stops the server (SIGKILL: an outage as the gateway sees it); `start` starts it again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops it for good and removes its dir. */
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether something answers PING on `port` (NOAUTH is an answer: a server that wants a password). */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket();
    s.once('error', () => resolve(false));
    s.connect(port, '127.0.0.1', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH'));
    });
  });
}

export async function startRedis(auth?: RedisAuth): Promise<TestRedis> {
  if (!HAVE_REDIS) throw new Error(`CI=true and no ${BIN}: .ci/install-redis should have installed it`);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  if (auth !== undefined) {
    // An ACL file in the server's dir: the default user (with its password, if any), then the others.
    const file = join(dir, 'users.acl');
    const lines = [`user default on ${auth.password === undefined ? 'nopass' : `>${auth.password}`} ~* &* +@all`, ...(auth.users ?? []).map((u) => `user ${u}`)];
    writeFileSync(file, `${lines.join('\n')}\n`);
    args.push('--aclfile', file);
  }
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    const c = spawn(BIN, args, { stdio: 'ignore' });
    child = c;
    await eventually(async () => c.exitCode !== null || (await pings(port)), 10_000, 'redis-server to answer PING');
    if (c.exitCode !== null) throw new Error(`redis-server exited with ${c.exitCode} (port ${port} taken?)`);
  };
  const stop = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    start,
    stop,
    close: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
