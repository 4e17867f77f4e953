// The multi-turn chat workload of the routing simulation: sessions arriving over time, each a few
// turns apart, each turn's prompt the whole conversation so far (so a replica that served the
// previous turn has most of it in its prefix cache). Seeded: every policy gets the same sessions.
// The client streams each answer and times the first token and the end.
import { Agent, request } from 'node:http';

interface Turn {
  /** Prompt tokens: the conversation so far plus the new user message. */
  prompt: number;
  output: number;
  /** Pause after the answer, before the next turn. */
  thinkMs: number;
}

export interface Session {
  id: string;
  /** When it starts, ms after the run starts. */
  startMs: number;
  turns: Turn[];
}

export interface WorkloadShape {
  /** Sessions start over this many seconds. */
  durationS: number;
  sessionsPerS: number;
  seed: number;
}

/** mulberry32: a small seeded generator, the same sequence on every run. */
export function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function plan(shape: WorkloadShape): Session[] {
  const random = generator(shape.seed);
  const between = (lo: number, hi: number): number => Math.round(lo + random() * (hi - lo));
  const sessions: Session[] = [];
  const count = Math.max(1, Math.round(shape.durationS * shape.sessionsPerS));
  for (let i = 0; i < count; i++) {
    let context = between(600, 1500); // system prompt and documents
    const turns: Turn[] = [];
    for (let t = between(3, 6); t > 0; t--) {
      const user = between(40, 200);
      const output = between(60, 160);
      turns.push({ prompt: context + user, output, thinkMs: between(300, 1500) });
      context += user + output;
    }
    sessions.push({ id: `session-${shape.seed}-${i}`, startMs: Math.round(random() * shape.durationS * 1000), turns });
  }
  return sessions.sort((a, b) => a.startMs - b.startMs);
}

export interface TurnResult {
  session: string;
  status: number;
  /** Request sent → first token read, ms (-1 without a token). */
  ttftMs: number;
  /** Request sent → answer complete, ms. */
  totalMs: number;
}

/** Runs every session against `url`, each turn's answer read to its end; resolves with every turn. */
export async function runSessions(url: string, token: string, sessions: readonly Session[]): Promise<TurnResult[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 4096 });
  const results: TurnResult[] = [];
  const t0 = performance.now();
  try {
    await Promise.all(
      sessions.map(async (s) => {
        await sleep(s.startMs - (performance.now() - t0));
        for (const turn of s.turns) {
          results.push(await chatTurn(agent, url, token, s.id, turn));
          await sleep(turn.thinkMs);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return results;
}

function chatTurn(agent: Agent, url: string, token: string, session: string, turn: Turn): Promise<TurnResult> {
  const body = JSON.stringify({ session, prompt_tokens: turn.prompt, max_tokens: turn.output, stream: true });
  const started = performance.now();
  return new Promise((resolve) => {
    let ttft = -1;
    const done = (status: number): void => resolve({ session, status, ttftMs: ttft, totalMs: performance.now() - started });
    const req = request(
      url,
      {
        agent,
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-session-id': session },
      },
      (res) => {
        res.on('data', (chunk: Buffer) => {
          if (ttft < 0 && res.statusCode === 200 && chunk.includes('data: {')) ttft = performance.now() - started;
        });
        res.on('end', () => done(res.statusCode ?? 0));
        res.on('error', () => done(0));
      },
    );
    req.on('error', () => done(0));
    req.end(body);
  });
}

function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
