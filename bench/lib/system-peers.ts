// The peers that are not Node programs (nginx, HAProxy, Caddy): find each on the machine, or
// install it with apt when the run may (root, apt-get present, not a smoke run), and say why it
// is skipped otherwise. Debian starts a service when its package is installed unless
// policy-rc.d says no: the benchmark wants none of them running as a system service, so it
// provides one for the install when the system has none.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

export type SystemPeerId = 'nginx' | 'haproxy' | 'caddy';

export type SystemBinary = { path: string; version: string; installedNow: boolean } | { path: undefined; reason: string };

interface Program {
  /** The executable's name on PATH. */
  command: string;
  /** Where it may be when PATH does not have it. */
  candidates: string[];
  /** Debian packages to try, in order. */
  packages: string[];
  version(path: string): string;
}

const firstLine = (text: string): string => text.trim().split('\n')[0] ?? '';

const PROGRAMS: Record<SystemPeerId, Program> = {
  nginx: {
    command: 'nginx',
    candidates: ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx', '/usr/bin/nginx'],
    packages: ['nginx-light', 'nginx'],
    version: (path) => {
      const r = spawnSync(path, ['-v'], { encoding: 'utf8' });
      return firstLine(r.stderr || r.stdout || '').replace(/^nginx version:\s*/, '');
    },
  },
  haproxy: {
    command: 'haproxy',
    candidates: ['/usr/sbin/haproxy', '/usr/local/sbin/haproxy', '/usr/bin/haproxy'],
    packages: ['haproxy'],
    version: (path) => firstLine(spawnSync(path, ['-v'], { encoding: 'utf8' }).stdout ?? '').replace(/ - https?:\/\/\S+$/, ''),
  },
  caddy: {
    command: 'caddy',
    candidates: ['/usr/bin/caddy', '/usr/local/bin/caddy'],
    packages: ['caddy'],
    version: (path) => `Caddy ${firstLine(spawnSync(path, ['version'], { encoding: 'utf8' }).stdout ?? '')}`,
  },
};

function find(program: Program): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, program.command))) return join(dir, program.command);
  }
  return program.candidates.find((p) => existsSync(p));
}

/** apt-get install of the first package that installs; `apt-get update` once if none does. */
function aptInstall(program: Program, log: (m: string) => void): string | undefined {
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const install = (pkg: string): boolean =>
      spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', pkg], { env, stdio: ['ignore', 'ignore', 'inherit'] }).status === 0;
    for (const pkg of program.packages) {
      log(`${program.command}: not found; apt-get install ${pkg}`);
      if (install(pkg)) return find(program);
    }
    log(`${program.command}: apt-get update, then install again`);
    if (spawnSync('apt-get', ['update', '-q'], { env, stdio: ['ignore', 'ignore', 'inherit'] }).status !== 0) return undefined;
    for (const pkg of program.packages) if (install(pkg)) return find(program);
    return undefined;
  } finally {
    if (ownPolicy) unlinkSync(policy);
  }
}

/** The program's path and version; when missing, installs it with apt if `mayInstall` and we are root. */
export function ensureSystemPeer(id: SystemPeerId, mayInstall: boolean, log: (m: string) => void): SystemBinary {
  const program = PROGRAMS[id];
  const found = find(program);
  if (found !== undefined) return { path: found, version: program.version(found), installedNow: false };
  if (!mayInstall) return { path: undefined, reason: `${id} is not installed (smoke runs never install it)` };
  if (process.getuid?.() !== 0) return { path: undefined, reason: `${id} is not installed and installing it needs root` };
  try {
    execFileSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' });
  } catch {
    return { path: undefined, reason: `${id} is not installed and there is no apt-get to install it` };
  }
  const installed = aptInstall(program, log);
  if (installed === undefined) return { path: undefined, reason: `${id} is not installed and apt-get could not install it` };
  return { path: installed, version: program.version(installed), installedNow: true };
}

/** A port that was free a moment ago on 127.0.0.1 (for programs that cannot report the one they got). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
