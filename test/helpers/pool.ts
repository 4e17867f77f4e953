// Helpers for the pool tests: services whose launched replicas are test/fixtures/pool-replica.ts,
// each keeping the shared journal of starts and exits, and readers of that journal.
import { mkdtempSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { AUTH, TEST_TOKEN_SHA256, type RawService, type TestGateway } from './gateway.js';

/** The compiled pool replica (dist/test/fixtures/pool-replica.js). */
export const POOL_REPLICA = fileURLToPath(new URL('../fixtures/pool-replica.js', import.meta.url));

/** A fresh directory for a test's journal and gate files. */
export function scratch(): string {
  return mkdtempSync(join(tmpdir(), 'sluice-pool-'));
}

/** A service `slug` on pool `pool` whose replicas journal into `journal` as `slug`. */
export function pooled(slug: string, pool: string, journal: string, replicas: Record<string, unknown> = {}, env: Record<string, string> = {}, extra: Record<string, unknown> = {}): RawService {
  return {
    slug,
    tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }],
    replicas: {
      command: [process.execPath, POOL_REPLICA],
      readyPath: '/health',
      pool,
      env: { TAG: slug, JOURNAL: journal, UNITS: '{units}', ...env },
      ...replicas,
    },
    ...extra,
  };
}

/** The journal's lines: `start TAG pid UNITS`, `exit TAG pid`. */
export function journalLines(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((line) => line !== '') : [];
}

/** The journal as `start a`, `exit a`, … (tag only), in order. */
export function events(file: string): string[] {
  return journalLines(file).map((line) => line.split(' ').slice(0, 2).join(' '));
}

/** Opens a gate: requests held on it (POST /held?gate=F) are answered. */
export function open(gate: string): void {
  writeFileSync(gate, 'open');
}

export interface Answer {
  status: number;
  body: { tag?: string; pid?: number; units?: string; argv?: string[] } & Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

/** POSTs to service `slug`'s `path` and reads the whole answer. */
export async function post(tg: TestGateway, slug: string, path: string, agent: Agent, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(tg.url(path, slug), { method: 'POST', headers: { ...AUTH, ...headers }, body: 'x', dispatcher: agent });
  const text = await res.body.text();
  let body: Answer['body'] = {};
  try {
    body = JSON.parse(text) as Answer['body'];
  } catch {
    body = { text };
  }
  return { status: res.statusCode, body, headers: res.headers };
}
