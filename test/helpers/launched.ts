// Helpers for gateway-level lifecycle tests: launched replicas from test/fixtures/recording-replica.ts.
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The compiled recording replica (dist/test/fixtures/recording-replica.js). */
export const RECORDING_REPLICA = fileURLToPath(new URL('../fixtures/recording-replica.js', import.meta.url));

/** A fresh file path the replica records requests into. */
export function recordFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'sluice-test-')), 'requests.log');
}

/** Lines `pid METHOD url` the replicas recorded. */
export function recorded(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((line) => line !== '') : [];
}

/** Whether a process is alive (a zombie counts as gone): the replica-set tests' check. */
export { pidAlive as isAlive } from '../fixtures/replica-harness.js';

/** `replica state` log lines of a service going to `to`. */
export function transitions(logs: Record<string, unknown>[], to: string): Record<string, unknown>[] {
  return logs.filter((line) => line.msg === 'replica state' && line.to === to);
}
