// A model server's scheduler in miniature, for the routing simulation: continuous batching as vLLM,
// SGLang and TGI do it, with time compressed (a decode step of about 10 ms instead of 25 to 50).
//
// - At most `batch` sequences run at once; the others wait in a FIFO queue (vLLM's
//   `num_requests_waiting`). A sequence is admitted when a batch place is free and the KV cache
//   can hold its prompt and output (blocks are reserved on admission, as a simple stand-in for
//   vLLM's block manager); `kvUsage` is the share reserved (`kv_cache_usage_perc`).
// - Each step emits one token for every running sequence and lasts `decodeMs × (1 +
//   batchSlowdown × (running - 1))`: time per token grows with the batch. A step that admits
//   sequences first prefills their prompts (`prefillMsPer1k` per 1,000 uncached tokens): the first
//   token of a sequence comes at the end of the step that admitted it.
// - Prefix cache: the tokens of a session's last turn (its prompt and answer) stay cached, up to
//   `prefixCacheTokens` for all sessions (least recently used out first), so the session's next
//   turn prefills only what is new — on this replica only.
// Timers only: no CPU is burnt to simulate work.

export interface EngineSpec {
  name: string;
  /** Sequences that run at once. */
  batch: number;
  /** One decode step with one running sequence, ms. */
  decodeMs: number;
  /** Each extra running sequence makes a step this much longer (0.06 = 6 %). */
  batchSlowdown: number;
  /** Prefill time per 1,000 prompt tokens not in the prefix cache, ms. */
  prefillMsPer1k: number;
  /** KV cache, tokens. */
  kvTokens: number;
  /** Prefix cache for finished turns, tokens. */
  prefixCacheTokens: number;
}

/** Where a sequence's tokens go (an HTTP response). */
export interface TokenSink {
  token(index: number): void;
  end(): void;
  /** The caller left: the sequence is dropped at the next step. */
  readonly gone: boolean;
}

interface Sequence {
  session: string;
  prompt: number;
  output: number;
  generated: number;
  sink: TokenSink;
}

export interface EngineStats {
  requests: number;
  promptTokens: number;
  /** Prompt tokens served from the prefix cache. */
  cachedTokens: number;
  /** Most sequences waiting at once. */
  maxWaiting: number;
}

export class BatchingEngine {
  private readonly waiting: Sequence[] = [];
  private readonly running: Sequence[] = [];
  /** Session → tokens cached of its last turn, in least-recently-used order. */
  private readonly prefix = new Map<string, number>();
  private prefixTotal = 0;
  private kvUsed = 0;
  private stepping = false;
  readonly stats: EngineStats = { requests: 0, promptTokens: 0, cachedTokens: 0, maxWaiting: 0 };

  constructor(readonly spec: EngineSpec) {}

  get waitingCount(): number {
    return this.waiting.length;
  }

  get kvUsage(): number {
    return this.kvUsed / this.spec.kvTokens;
  }

  submit(session: string, prompt: number, output: number, sink: TokenSink): void {
    this.waiting.push({ session, prompt, output: Math.max(1, output), generated: 0, sink });
    this.stats.requests++;
    this.stats.promptTokens += prompt;
    if (this.waiting.length > this.stats.maxWaiting) this.stats.maxWaiting = this.waiting.length;
    if (!this.stepping) this.step();
  }

  private step(): void {
    const { spec } = this;
    let prefill = 0;
    while (this.running.length < spec.batch && this.waiting.length > 0) {
      const next = this.waiting[0]!;
      if (next.sink.gone) {
        this.waiting.shift();
        continue;
      }
      const need = next.prompt + next.output;
      if (this.running.length > 0 && this.kvUsed + need > spec.kvTokens) break; // no room in the cache
      this.waiting.shift();
      const cached = Math.min(this.takePrefix(next.session), next.prompt);
      this.stats.cachedTokens += cached;
      prefill += next.prompt - cached;
      this.kvUsed += need;
      this.running.push(next);
    }
    if (this.running.length === 0) {
      this.stepping = false;
      return;
    }
    this.stepping = true;
    const ms = spec.decodeMs * (1 + spec.batchSlowdown * (this.running.length - 1)) + (prefill * spec.prefillMsPer1k) / 1000;
    setTimeout(() => this.emit(), ms);
  }

  private emit(): void {
    for (let i = this.running.length - 1; i >= 0; i--) {
      const seq = this.running[i]!;
      if (!seq.sink.gone) seq.sink.token(seq.generated);
      seq.generated++;
      if (seq.generated < seq.output && !seq.sink.gone) continue;
      this.running.splice(i, 1);
      this.kvUsed -= seq.prompt + seq.output;
      if (!seq.sink.gone) seq.sink.end();
      this.putPrefix(seq.session, seq.prompt + seq.generated);
    }
    this.step();
  }

  private takePrefix(session: string): number {
    const tokens = this.prefix.get(session);
    if (tokens === undefined) return 0;
    // Used again: the most recent now.
    this.prefix.delete(session);
    this.prefix.set(session, tokens);
    return tokens;
  }

  private putPrefix(session: string, tokens: number): void {
    this.prefixTotal -= this.prefix.get(session) ?? 0;
    this.prefix.delete(session);
    this.prefix.set(session, tokens);
    this.prefixTotal += tokens;
    for (const [oldest, n] of this.prefix) {
      if (this.prefixTotal <= this.spec.prefixCacheTokens) break;
      this.prefix.delete(oldest);
      this.prefixTotal -= n;
    }
  }
}
