// Our own client for what autocannon cannot see: time to first byte and per-token timing.
// undici's dispatch() with a handler object, timed with process.hrtime.bigint() (CLOCK_MONOTONIC,
// the clock the replica stamps tokens with: shared by every process on Linux).
import { type Dispatcher, Pool } from 'undici';
import { nsToUs } from './stats.js';
import { STREAM_REQUEST } from './workload.js';

export interface Target {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  /** What goes before the replica path: '' for direct and bare, `/api/v1/services/bench/request` for sluice. */
  prefix: string;
  headers: Record<string, string>;
}

export interface Timed {
  /** When the request was sent: CLOCK_MONOTONIC, µs (the clock every process of the run shares). */
  startUs: number;
  /** Request sent (dispatch called) → first body chunk in JS, µs. */
  ttfbUs: number;
  /** Request sent → end of the answer, µs. */
  totalUs: number;
}

/** One request on `pool`; rejects unless the answer is a 200. */
export function timedRequest(pool: Pool, options: Dispatcher.DispatchOptions): Promise<Timed> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let first = 0n;
    const t0 = process.hrtime.bigint();
    pool.dispatch(options, {
      onRequestStart() {}, // selects undici's controller-style handler API
      onResponseStart(_c, code) {
        status = code;
      },
      onResponseData() {
        if (first === 0n) first = process.hrtime.bigint();
      },
      onResponseEnd() {
        const end = process.hrtime.bigint();
        if (status !== 200) reject(new Error(`status ${status}`));
        else resolve({ startUs: nsToUs(t0), ttfbUs: nsToUs((first === 0n ? end : first) - t0), totalUs: nsToUs(end - t0) });
      },
      onResponseError(_c, err) {
        reject(err);
      },
    });
  });
}

/**
 * `requests` POSTs of `body` to `path`, `concurrency` at a time, each on its own keep-alive
 * connection (warmed first, not counted). Returns one TTFB sample per request.
 */
export async function measureTtfb(
  target: Target,
  path: string,
  body: string,
  requests: number,
  concurrency = 1,
): Promise<number[]> {
  const pool = new Pool(target.origin, { connections: concurrency, pipelining: 1 });
  const options: Dispatcher.DispatchOptions = {
    method: 'POST',
    path: target.prefix + path,
    headers: { ...target.headers, 'content-type': 'application/json' },
    body,
  };
  try {
    const warm = Array.from({ length: concurrency * 4 }, () => timedRequest(pool, options));
    await Promise.all(warm);
    const samples: number[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < requests) {
        next += 1;
        samples.push((await timedRequest(pool, options)).ttfbUs);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return samples;
  } finally {
    await pool.close();
  }
}

export interface StreamTiming {
  /** Request sent → first token event in JS, µs (includes the replica's gap before it). */
  ttftUs: number;
  /** Replica wrote the first token → it reached the client's JS, µs (the relay's status line and first chunk). */
  firstDeliveryUs: number;
  /** Time between consecutive token arrivals, µs. */
  gapsUs: number[];
  /** Replica wrote the token → token in the client's JS, µs (same CLOCK_MONOTONIC, see replica.ts). */
  deliveryUs: number[];
  /** deliveryUs of the tokens the replica wrote once every stream of the batch had started (see measureStreams). */
  steadyDeliveryUs: number[];
  tokens: number;
}

/** Shared by the streams of one batch: when the last of them got its response head. */
interface Batch {
  size: number;
  started: number;
  allStartedNs: bigint;
}

function timedStream(pool: Pool, options: Dispatcher.DispatchOptions, batch?: Batch): Promise<StreamTiming> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let carry = '';
    let last = 0n;
    const t0 = process.hrtime.bigint();
    const timing: StreamTiming = { ttftUs: -1, firstDeliveryUs: -1, gapsUs: [], deliveryUs: [], steadyDeliveryUs: [], tokens: 0 };
    pool.dispatch(options, {
      onRequestStart() {}, // selects undici's controller-style handler API
      onResponseStart(_c, code) {
        status = code;
        if (batch !== undefined && ++batch.started === batch.size) batch.allStartedNs = process.hrtime.bigint();
      },
      onResponseData(_c, chunk) {
        const now = process.hrtime.bigint();
        carry += chunk.toString('latin1');
        let end: number;
        while ((end = carry.indexOf('\n\n')) >= 0) {
          const event = carry.slice(0, end);
          carry = carry.slice(end + 2);
          const t = /"t":"(\d+)"/.exec(event);
          if (t === null) continue;
          const written = BigInt(t[1]!);
          const delivery = nsToUs(now - written);
          if (batch !== undefined && batch.allStartedNs !== 0n && written >= batch.allStartedNs) timing.steadyDeliveryUs.push(delivery);
          if (timing.tokens === 0) {
            timing.ttftUs = nsToUs(now - t0);
            timing.firstDeliveryUs = delivery;
          } else {
            timing.gapsUs.push(nsToUs(now - last));
          }
          timing.deliveryUs.push(delivery);
          timing.tokens += 1;
          last = now;
        }
      },
      onResponseEnd() {
        if (status !== 200) reject(new Error(`status ${status}`));
        else resolve(timing);
      },
      onResponseError(_c, err) {
        reject(err);
      },
    });
  });
}

/**
 * `streams` SSE requests all at once, each on its own connection (so the relay holds `streams`
 * streams at the same time); each must deliver `tokens` token events, written by the replica's
 * batch clock (a token to every open stream per tick, see replica.ts). `steadyDeliveryUs` keeps
 * the tokens written after every stream had started, so the burst of connections opening is not
 * counted as token delivery. A stream cut short resolves with the tokens it got.
 */
export async function measureStreams(target: Target, streams: number, tokens: number, gapMs: number): Promise<StreamTiming[]> {
  const pool = new Pool(target.origin, { connections: streams, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const options: Dispatcher.DispatchOptions = {
    method: 'POST',
    path: `${target.prefix}/v1/stream?tokens=${tokens}&gap_ms=${gapMs}&batch=1`,
    headers: { ...target.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: STREAM_REQUEST,
  };
  try {
    const batch: Batch = { size: streams, started: 0, allStartedNs: 0n };
    // A stream that ends early (a relay that cut it) is returned as it is: the caller counts it.
    return await Promise.all(Array.from({ length: streams }, () => timedStream(pool, options, batch)));
  } finally {
    await pool.close();
  }
}

/** One POST, for a sanity check: status and body text. */
export async function fetchOnce(target: Target, path: string, body: string): Promise<{ status: number; body: string }> {
  const pool = new Pool(target.origin, { connections: 1 });
  try {
    const res = await pool.request({
      method: 'POST',
      path: target.prefix + path,
      headers: { ...target.headers, 'content-type': 'application/json' },
      body,
    });
    return { status: res.statusCode, body: await res.body.text() };
  } finally {
    await pool.close();
  }
}
