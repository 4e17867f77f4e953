// The pool benchmark's workload (bench/pool-swaps.ts): a seeded trace of streamed chat requests
// that switch models — bursts of requests for one model, some overlapping, with idle gaps between
// them — and the client that plays it against a router, stamping each request on CLOCK_MONOTONIC
// (the clock the replicas' journals use).
import { Agent, request } from 'node:http';
import { generator } from './chat-workload.js';

/** The four models, most used first (their share of the bursts). */
export const MODELS = ['chat', 'coder', 'summarize', 'translate'] as const;
const WEIGHTS = [0.4, 0.3, 0.2, 0.1];

export interface TraceRequest {
  id: number;
  model: string;
  /** When it is sent, ms after the trace starts. */
  atMs: number;
  maxTokens: number;
}

export interface TraceShape {
  durationS: number;
  seed: number;
  /** Times within the trace (spreads, gaps) × this: 1, or less for a shorter test of the same shape. */
  pace: number;
}

/**
 * Bursts of 1 to 6 requests for one model (chosen by weight), spread over up to 1.5 s, each 8 to 40
 * tokens long; between bursts a gap of 0.2 to 3 s (so bursts for different models overlap while a
 * swap is under way), or one time in four an idle gap of 5 to 15 s. Deterministic from the seed.
 */
export function trace(shape: TraceShape): TraceRequest[] {
  const random = generator(shape.seed);
  const between = (lo: number, hi: number): number => Math.round(lo + random() * (hi - lo));
  const pick = (): string => {
    let r = random();
    for (let i = 0; i < MODELS.length; i++) {
      r -= WEIGHTS[i]!;
      if (r < 0) return MODELS[i]!;
    }
    return MODELS[MODELS.length - 1]!;
  };
  const out: Omit<TraceRequest, 'id'>[] = [];
  const endMs = shape.durationS * 1000;
  for (let t = 0; t < endMs; ) {
    const model = pick();
    const spread = between(0, 1500) * shape.pace;
    for (let n = between(1, 6); n > 0; n--) out.push({ model, atMs: Math.round(t + between(0, spread)), maxTokens: between(8, 40) });
    t += spread + (random() < 0.25 ? between(5_000, 15_000) : between(200, 3_000)) * shape.pace;
  }
  return out.sort((a, b) => a.atMs - b.atMs).map((r, id) => ({ id, ...r }));
}

export interface RequestResult {
  id: number;
  model: string;
  status: number;
  /** Token events read (`data: {…}`), and whether `data: [DONE]` came. */
  tokens: number;
  expected: number;
  done: boolean;
  /** CLOCK_MONOTONIC ms: sent, first token read (NaN without one), answer ended. */
  sentAt: number;
  firstTokenAt: number;
  endAt: number;
}

/** Milliseconds on CLOCK_MONOTONIC (µs resolution): the clock of the replicas' journals. */
function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000;
}

/** Plays the trace against `url` (a router's chat completions), each answer read to its end. */
export async function play(url: string, token: string, requests: readonly TraceRequest[]): Promise<RequestResult[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 4096 });
  const t0 = performance.now();
  try {
    return await Promise.all(
      requests.map(async (r) => {
        const wait = r.atMs - (performance.now() - t0);
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        return chat(agent, url, token, r);
      }),
    );
  } finally {
    agent.destroy();
  }
}

function chat(agent: Agent, url: string, token: string, r: TraceRequest): Promise<RequestResult> {
  const body = JSON.stringify({ model: r.model, stream: true, max_tokens: r.maxTokens, bench_id: r.id, messages: [{ role: 'user', content: 'hello' }] });
  const result: RequestResult = { id: r.id, model: r.model, status: 0, tokens: 0, expected: r.maxTokens, done: false, sentAt: monotonicMs(), firstTokenAt: Number.NaN, endAt: Number.NaN };
  return new Promise((resolve) => {
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      result.endAt = monotonicMs();
      resolve(result);
    };
    const req = request(
      url,
      { agent, method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        result.status = res.statusCode ?? 0;
        let buffered = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffered += chunk;
          let cut = buffered.indexOf('\n\n');
          while (cut >= 0) {
            const event = buffered.slice(0, cut);
            buffered = buffered.slice(cut + 2);
            if (event.startsWith('data: {')) {
              if (result.tokens === 0) result.firstTokenAt = monotonicMs();
              result.tokens++;
            } else if (event === 'data: [DONE]') result.done = true;
            cut = buffered.indexOf('\n\n');
          }
        });
        res.on('end', finish);
        res.on('error', finish);
        res.on('close', finish);
      },
    );
    req.on('error', finish);
    req.end(body);
  });
}
