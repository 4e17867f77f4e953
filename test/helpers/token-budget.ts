// What the tests of tokensPerDay and tokensPerMonth share: answers of a scripted replica
// (sse-replica.ts) that report their usage, a request that resolves once it has settled, and a
// refusal whose Retry-After is checked against the clock around the request.
import assert from 'node:assert/strict';
import { AUTH, type TestGateway } from './gateway.js';
import type { StreamScript } from './sse-replica.js';
import { eventually } from './wait.js';

/** A JSON answer reporting `prompt` + `completion` tokens. */
export function usage(prompt: number, completion: number): StreamScript {
  const body = JSON.stringify({ id: 'c', choices: [{ message: { content: 'hi' } }], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });
  return { contentType: 'application/json', withLength: true, pieces: [[0, body]] };
}

export interface Sent {
  status: number;
  headers: Headers;
  body: string;
  /** The clock just before the request and just after its answer (ms). */
  before: number;
  after: number;
}

/** Sends `script` (plus `extra` body fields) to the first service with the test token, or `to` a URL with a token; an admitted request resolves once its access line is written (it has settled). */
export async function send(tg: TestGateway, script: StreamScript, extra: Record<string, unknown> = {}, to?: { url: string; token: string }): Promise<Sent> {
  const before = Date.now();
  const auth = to === undefined ? AUTH : { authorization: `Bearer ${to.token}` };
  const res = await fetch(to?.url ?? tg.url('/v1/chat/completions'), { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ ...script, ...extra }) });
  const body = await res.text();
  const after = Date.now();
  if (res.status === 200) {
    const id = res.headers.get('x-request-id');
    await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
  }
  return { status: res.status, headers: res.headers, body, before, after };
}

export function nextUtcMidnight(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

export function nextUtcMonth(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** A 429 by `limit` whose Retry-After is the time to `reset` (of the clock) from some moment between the request's start and its end. */
export function assertRefusedUntil(a: Sent, limit: string, reset: (ms: number) => number): void {
  assert.equal(a.status, 429, a.body);
  assert.equal(a.headers.get('x-sluice-error'), 'rate_limited');
  const error = (JSON.parse(a.body) as { error: { code: string; limit: string; message: string } }).error;
  assert.equal(error.code, 'rate_limited');
  assert.equal(error.limit, limit);
  assert.match(error.message, new RegExp(limit));
  const retryAfter = Number(a.headers.get('retry-after'));
  assert.ok(Number.isInteger(retryAfter), `Retry-After ${a.headers.get('retry-after')}`);
  // The reset the refusal saw lies between those of the request's start and end (equal but at a reset).
  const earliest = Math.max(1, Math.floor((reset(a.after) - a.after) / 1000));
  const latest = Math.ceil((reset(a.before) - a.before) / 1000);
  if (reset(a.before) === reset(a.after)) assert.ok(retryAfter >= earliest && retryAfter <= latest, `Retry-After ${retryAfter}, expected from ${earliest} to ${latest}`);
}

