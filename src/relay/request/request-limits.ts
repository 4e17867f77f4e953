// A request's part in its token's limits (docs/api.md#limits-per-caller), around what the limit
// table does (limits/limit-table.ts): the 429 of a refused request (or the 503 while the shared
// store is down), and the admissions decided after the request filter: a request of a token with
// a limit of tokens (tokensPerMinute, tokensPerDay, tokensPerMonth) once its body's first part
// says its reservation (body-fields.ts), a request whose lease from the shared store ran out once
// the control plane topped it up. Such a request is
// admitted as its token is at that moment (a reload may have replaced it: auth.ts `currentEntry`),
// and starts only once admitted. The tokens it settles with at its end: finished-request.ts `settledTokens`.
import { RelayError } from '../../http/errors.js';
import type { LimitName } from '../../limits/limit-layout.js';
import type { LimitTable, TokenLimit } from '../../limits/limit-table.js';
import { ratelimitRefused, ratelimitState } from '../../limits/rate-limit-headers.js';
import { currentEntry, type TokenEntry, WWW_AUTHENTICATE_INVALID } from './auth.js';
import type { BodyFields } from '../body/body-fields.js';

/** The longest a request waits for the shared limit store's top-up of its token's lease; then `onStoreDown`. */
const LIMIT_STORE_WAIT_MS = 50;

/**
 * What admission reads and writes of a request: relay.ts's `RelayRequest`, declared here so that
 * the relay imports its admission step and not the reverse.
 */
export interface AdmittedRequest {
  /** Its token (as it is after a reload, once admitted). */
  token: TokenEntry;
  limit: TokenLimit | undefined;
  reserved: number;
  admitting: 'no' | 'store' | 'body';
  readonly phase: string;
  readonly fields: BodyFields | undefined;
  readonly downstream: { ratelimit(policy: string, value: string): void };
  start(): void;
  refuse(error: RelayError): void;
}

/** Each limit in words, for a limit of one and for more. */
const PER = {
  requestsPerMinute: ['request per minute', 'requests per minute'],
  concurrent: ['request at once', 'requests at once'],
  tokensPerMinute: ['token per minute', 'tokens per minute'],
  tokensPerDay: ['token per UTC day', 'tokens per UTC day'],
  tokensPerMonth: ['token per UTC month', 'tokens per UTC month'],
} as const;

/** `429 rate_limited` for a request of `limit`'s token that `table.admit` just refused. */
function rateLimited(table: LimitTable, limit: TokenLimit, tokenName: string): RelayError {
  const name = table.refusedBy;
  const retryAfter = table.retryAfter;
  const quota = limit.limits[name];
  return new RelayError('rate_limited', {
    message: `The limit ${name} of token "${tokenName}" (${quota} ${PER[name][quota === 1 ? 0 : 1]}) is reached; retry in ${retryAfter} s.`,
    limit: name,
    headers: { 'retry-after': String(retryAfter), 'ratelimit-policy': limit.policy, ratelimit: ratelimitRefused(name, retryAfter) },
  });
}

/** The error of a request that `table.admit` did not admit: `429 rate_limited`, or `503 limits_unavailable` (the store is down, `onStoreDown: refuse`). */
export function refusedByLimits(verdict: LimitName | 'unavailable', table: LimitTable, limit: TokenLimit, tokenName: string): RelayError {
  return verdict === 'unavailable' ? new RelayError('limits_unavailable', { headers: { 'retry-after': '1' } }) : rateLimited(table, limit, tokenName);
}

/** `request` was admitted under `limit`: it ends in the table at its end, and its answer carries RateLimit-Policy and RateLimit. */
export function admitted(request: AdmittedRequest, limit: TokenLimit, table: LimitTable): void {
  request.limit = limit;
  request.downstream.ratelimit(limit.policy, ratelimitState(limit.limits, table));
}

/**
 * A request of a token with a limit of tokens whose body's first part is in (`request.admitting` is
 * `body`): admitted with the reservation it reads (or refused, or waiting for the shared store).
 * False when it ended.
 */
export function admitByBody(request: AdmittedRequest, table: LimitTable): boolean {
  const decided = decide(request, table, false);
  if (typeof decided === 'object') waitForLimits(request, table, decided);
  return decided !== 'done';
}

/**
 * A request whose token's lease from the shared store ran out (`admit` said `wait` for `limit`;
 * the request is built, its body arriving): it waits for the control plane's top-up, at most
 * LIMIT_STORE_WAIT_MS, then is admitted and started, or refused. Off the hot path: a lease is
 * asked for before it runs out.
 */
export function waitForLimits(request: AdmittedRequest, table: LimitTable, limit: TokenLimit): void {
  request.admitting = 'store';
  const deadline = performance.now() + LIMIT_STORE_WAIT_MS;
  let waitingOn = limit;
  const wait = (): void => {
    const waiting = table.topUp(waitingOn, Math.max(1, deadline - performance.now()));
    if (waiting === undefined) setImmediate(decideNow);
    else void waiting.then(decideNow);
  };
  const decideNow = (): void => {
    if (request.phase === 'done') return; // the caller left meanwhile
    // A top-up that others took first: the request asks again while its time lasts.
    const decided = decide(request, table, performance.now() >= deadline);
    if (typeof decided === 'object') {
      waitingOn = decided;
      wait();
    } else if (decided === 'start') request.start();
  };
  wait();
}

/**
 * Admits `request` by its token's limits as they are now, with the reservation its body says for
 * a token with a limit of tokens: `start` (admitted, or its token has no limits any more), `done`
 * (refused: answered), or the limit to wait on (the shared store's top-up; `waited`: the wait is over).
 */
function decide(request: AdmittedRequest, table: LimitTable, waited: boolean): 'start' | 'done' | TokenLimit {
  const token = currentEntry(request.token);
  if (token === undefined) {
    // A reload removed its token meanwhile: refused as the token is refused now.
    request.refuse(new RelayError('unauthorized', { headers: { 'www-authenticate': WWW_AUTHENTICATE_INVALID } }));
    return 'done';
  }
  request.token = token;
  const limit = token.limit;
  if (limit === undefined) {
    request.admitting = 'no';
    return 'start';
  }
  let reservation = 0;
  if (limit.cap !== 0 && request.fields !== undefined) {
    const read = request.fields.reservation(limit.cap);
    if (typeof read === 'string') {
      request.refuse(new RelayError('bad_request', { message: read }));
      return 'done';
    }
    reservation = read;
  }
  const verdict = table.admit(limit, waited, reservation);
  if (verdict === 'wait') return limit;
  if (verdict !== undefined) {
    request.refuse(refusedByLimits(verdict, table, limit, token.name));
    return 'done';
  }
  admitted(request, limit, table);
  request.reserved = reservation;
  request.admitting = 'no';
  return 'start';
}
