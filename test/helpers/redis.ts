// A real redis-server for the shared limit store's tests (docs/architecture.md#the-shared-store):
// Debian's package, started by the test itself on a free port, in a temp dir, without persistence
// (`--save '' --appendonly no`); over TLS only, if asked (`--port 0 --tls-port …`). In CI (CI=true) a missing redis-server fails the test (.ci/run
// installs it: .ci/install-redis); elsewhere the tests skip with REDIS_SKIP's message.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
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

/** A server that speaks TLS only (`--port 0 --tls-port PORT`), with this certificate and key. */
export interface RedisTls {
  certFile: string;
  keyFile: string;
  /** The CA of the clients' certificates (redis-server wants one even when it asks for none). */
  caFile: string;
  /** `--tls-auth-clients yes`: a client without a certificate of that CA is refused in the handshake. */
  authClients?: boolean;
}

export interface TestRedis {
  port: number;
  /** `redis://127.0.0.1:PORT` (`rediss://` with TLS) */
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

/**
 * Whether something answers PING on `port` (NOAUTH is an answer: a server that wants a password);
 * over TLS, a completed handshake is (the server is not verified, and one that wants a client
 * certificate refuses the connection only after it).
 */
function pings(port: number, tls: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tls
      ? tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
          s.destroy();
          resolve(true);
        })
      : new Socket();
    s.once('error', () => resolve(false));
    if (!tls) s.connect(port, '127.0.0.1', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      s.destroy();
      resolve(d.toString().startsWith('+PONG') || d.toString().startsWith('-NOAUTH'));
    });
  });
}

export async function startRedis(auth?: RedisAuth, tls?: RedisTls): Promise<TestRedis> {
  if (!HAVE_REDIS) throw new Error(`CI=true and no ${BIN}: .ci/install-redis should have installed it`);
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  const port = await freePort();
  const listen = tls === undefined ? ['--port', String(port)] : ['--port', '0', '--tls-port', String(port), '--tls-cert-file', tls.certFile, '--tls-key-file', tls.keyFile, '--tls-ca-cert-file', tls.caFile, '--tls-auth-clients', tls.authClients === true ? 'yes' : 'no'];
  const args = [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
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
    await eventually(async () => c.exitCode !== null || (await pings(port, tls !== undefined)), 10_000, 'redis-server to answer PING');
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
    url: `${tls === undefined ? 'redis' : 'rediss'}://127.0.0.1:${port}`,
    start,
    stop,
    close: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
