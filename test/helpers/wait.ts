// Waiting in tests, one helper for each kind of wait, all with the same argument order (what is
// awaited, the guard in ms, what it is called) (docs/architecture.md#tests):
// - `eventually` polls a condition that has no promise to await (a log line, a metric);
// - `within` awaits a promise, failing after a generous guard against a hang (never the thing checked);
// - `sleep` is for a scripted behaviour's own pace (a replica sending a part every 100 ms, a
//   caller that sends slowly), never to wait for an event.
import { setTimeout as delay } from 'node:timers/promises';

/** Polls `check` until it is true; fails after `timeoutMs` naming `what`. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(10);
  }
}

/** Waits for `promise`; fails after `timeoutMs` naming `what`. */
export async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A scripted pause of `ms` (a pace, not a wait for something). */
export function sleep(ms: number): Promise<void> {
  return delay(ms);
}
