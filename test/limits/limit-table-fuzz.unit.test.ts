// A property test of the limit table (src/limits/limit-table.ts, limit-control.ts, limit-cells.ts):
// random runs of admissions with reservations (from none to far past the limit, as a body may ask),
// settlements with any usage, callers that leave (nothing settled), refused requests sent again,
// reloads that rename, remove, add and re-limit tokens, threads that apply each reload in their own
// time, threads that die with requests in flight, and sweeps, with 1 and 2 data plane threads
// (LimitTable views for threads 0 and 1, interleaved operation by operation). After every operation:
// no count is below zero or past what an Int32 holds, each cell set counts exactly the requests of
// its current token (a reload never moves counts between tokens), and each thread's holds are its
// own requests'. After every run, once every request ended and every thread applied every reload,
// every count is back to zero and every retired cell set is free again.
//
// Seeded and reproducible: SLUICE_FUZZ_SEED and SLUICE_FUZZ_RUNS choose the first seed and the
// number of runs (one seed per run); a failure names its seed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { LimitsConfig } from '../../src/config/types.js';
import { LimitCells } from '../../src/limits/limit-cells.js';
import { LimitControl } from '../../src/limits/limit-control.js';
import { createLimitBuffer } from '../../src/limits/limit-memory.js';
import { BUCKETS, HEADER, INFLIGHT, RESERVED, STRIDE } from '../../src/limits/limit-layout.js';
import { LimitTable, type TokenLimit, tokenLimit } from '../../src/limits/limit-table.js';
import { BUCKET_MAX, WINDOW_S } from '../../src/limits/token-window.js';
import { sha256Hex } from '../../src/cli/token.js';

const FIRST_SEED = Number(process.env['SLUICE_FUZZ_SEED'] ?? 20261201);
const RUNS = Number(process.env['SLUICE_FUZZ_RUNS'] ?? 240);
const OPS = 300;
const CELL_SETS = 12;
const NAMES = ['a', 'b', 'c', 'd', 'e'];

class Random {
  constructor(private state: number) {}
  next(): number {
    this.state = (Math.imul(this.state, 1103515245) + 12345) >>> 0;
    return this.state / 2 ** 32;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]!;
  }
}

/** Random limits: each key present or not, at least one. */
function randomLimits(r: Random): LimitsConfig {
  const limits: LimitsConfig = {};
  if (r.next() < 0.5) limits.concurrent = 1 + r.int(3);
  if (r.next() < 0.6) limits.tokensPerMinute = r.pick([50, 500, 1_000_000_000]);
  if (r.next() < 0.4 || Object.keys(limits).length === 0) limits.requestsPerMinute = r.pick([3, 100, 1_000_000]);
  return limits;
}

/** One config: the limited tokens by name, and one without limits (a service needs a token). */
function configOf(tokens: ReadonlyMap<string, LimitsConfig>): ReturnType<typeof parseConfig> {
  const list = [...tokens].map(([name, limits]) => ({ name, sha256: sha256Hex(`slc_fuzz_${name}_${'x'.repeat(40)}`), limits }));
  list.push({ name: 'unlimited', sha256: sha256Hex(`slc_fuzz_unlimited_${'x'.repeat(40)}`) } as never);
  return parseConfig({ listen: { host: '127.0.0.1', port: 0 }, services: [{ slug: 'svc', tokens: list, replicas: { urls: ['http://127.0.0.1:9'] } }] });
}

interface Reload {
  n: number;
  /** Each limited token's cell set and limits. */
  tokens: Map<string, { cell: number; limits: LimitsConfig }>;
}

interface Thread {
  table: LimitTable;
  /** The reload it applied last, and its tokens as it holds them (generations read when it applied). */
  applied: number;
  view: Map<string, TokenLimit>;
  alive: boolean;
}

interface Request {
  thread: number;
  limit: TokenLimit;
  reserved: number;
}

function run(seed: number, threadCount: number): void {
  const r = new Random(seed);
  const buffer = createLimitBuffer(CELL_SETS, threadCount);
  const a = new Int32Array(buffer);
  const control = new LimitControl(buffer);
  const cells = new LimitCells(control);
  const reloads: Reload[] = [];
  let current = new Map<string, LimitsConfig>([['a', randomLimits(r)]]);

  const reload = (tokens: Map<string, LimitsConfig>): boolean => {
    let assigned: number[][];
    try {
      assigned = cells.assign(configOf(tokens));
    } catch {
      return false; // no room while cell sets retire: the reload is refused, nothing changed
    }
    const byName = new Map<string, { cell: number; limits: LimitsConfig }>();
    [...tokens].forEach(([name, limits], i) => byName.set(name, { cell: assigned[0]![i]!, limits }));
    reloads.push({ n: cells.reload, tokens: byName });
    current = tokens;
    return true;
  };
  const apply = (t: Thread, index: number, n: number): void => {
    const to = reloads.find((x) => x.n === n)!;
    t.view = new Map([...to.tokens].map(([name, { cell, limits }]) => [name, tokenLimit(t.table, cell, limits, '')]));
    t.applied = n;
    t.table.applied(index, n);
  };
  assert.ok(reload(current));
  const threads: Thread[] = Array.from({ length: threadCount }, (_, i) => {
    const t: Thread = { table: new LimitTable(buffer, i), applied: 0, view: new Map(), alive: true };
    apply(t, i, cells.reload);
    return t;
  });
  let live: Request[] = [];

  const check = (what: string): void => {
    for (let cell = 0; cell < CELL_SETS; cell++) {
      const at = HEADER + cell * STRIDE;
      const gen = control.generation(cell);
      // A request that holds something of its cell set keeps it until it ends; one that holds
      // nothing (requestsPerMinute only) ends with nothing to give back, wherever its cell set went.
      const all = live.filter((q) => q.limit.cell === cell);
      for (const q of all) if (q.limit.counted) assert.equal(q.limit.gen, gen, `${what}: a running request's cell set went to another token`);
      const mine = all.filter((q) => q.limit.gen === gen);
      const inflight = Atomics.load(a, at + INFLIGHT);
      const reserved = Atomics.load(a, at + RESERVED);
      assert.equal(inflight, mine.filter((q) => q.limit.counted).length, `${what}: cell ${cell} inflight`);
      assert.equal(reserved, mine.reduce((n, q) => n + q.reserved, 0), `${what}: cell ${cell} reserved`);
      assert.ok(reserved >= 0 && reserved < 2 ** 31 - 1, `${what}: cell ${cell} reserved ${reserved}`);
      for (let i = 0; i < WINDOW_S; i++) {
        const n = Atomics.load(a, at + BUCKETS + 2 * i + 1);
        assert.ok(n >= 0 && n <= BUCKET_MAX, `${what}: cell ${cell} bucket ${i} holds ${n}`);
      }
      for (let thread = 0; thread < threadCount; thread++) {
        const hold = HEADER + CELL_SETS * STRIDE + thread * CELL_SETS * 2 + 2 * cell;
        const ofThread = mine.filter((q) => q.thread === thread);
        assert.equal(Atomics.load(a, hold), ofThread.filter((q) => q.limit.counted).length, `${what}: thread ${thread}'s places of cell ${cell}`);
        assert.equal(Atomics.load(a, hold + 1), ofThread.reduce((n, q) => n + q.reserved, 0), `${what}: thread ${thread}'s reservations of cell ${cell}`);
      }
    }
  };

  for (let op = 0; op < OPS; op++) {
    const roll = r.next();
    const ti = r.int(threadCount);
    const t = threads[ti]!;
    let what: string;
    if (roll < 0.4) {
      // An admission (or a refused request sent again): the reservation its body asks for, at most its limit.
      const name = r.pick([...t.view.keys()]);
      const limit = t.view.get(name);
      if (limit === undefined) continue;
      const asked = r.pick([0, 1, 30, 400, 999_999_999, 2 ** 31, 1e15]);
      const tpm = limit.limits.tokensPerMinute;
      const reservation = tpm === undefined ? 0 : Math.min(asked, tpm);
      const verdict = t.table.admit(limit, false, reservation);
      what = `admit ${name} on ${ti} reserving ${reservation}: ${String(verdict)}`;
      if (verdict === undefined) live.push({ thread: ti, limit, reserved: reservation });
    } else if (roll < 0.65) {
      // The end of a request: settled with what its answer used, or nothing when its caller left.
      if (live.length === 0) continue;
      const q = live.splice(r.int(live.length), 1)[0]!;
      const used = r.next() < 0.3 ? 0 : r.pick([1, 60, q.reserved, 5_000_000_000]);
      threads[q.thread]!.table.end(q.limit, q.reserved, used);
      what = `end on ${q.thread} settling ${used}`;
    } else if (roll < 0.75) {
      // A reload: a token renamed, removed, added, or limited otherwise.
      const next = new Map(current);
      const kind = r.int(4);
      const name = r.pick(NAMES);
      if (kind === 0 && next.size > 0) {
        const [old, limits] = r.pick([...next]);
        next.delete(old);
        next.set(r.pick(NAMES.filter((n) => !next.has(n))), limits);
      } else if (kind === 1 && next.size > 1) next.delete(r.pick([...next.keys()]));
      else next.set(name, randomLimits(r));
      what = `reload ${JSON.stringify([...next.keys()])}: ${reload(next) ? 'applied' : 'refused'}`;
    } else if (roll < 0.9) {
      // A thread applies the next reload it has not applied.
      const n = reloads.find((x) => x.n > t.applied)?.n;
      if (n === undefined) continue;
      apply(t, ti, n);
      what = `thread ${ti} applies reload ${n}`;
    } else if (roll < 0.95) {
      // A thread dies with its requests in flight and is replaced (with the tokens as they are now).
      control.reclaim(ti);
      live = live.filter((q) => q.thread !== ti);
      apply(t, ti, cells.reload);
      what = `thread ${ti} dies`;
    } else {
      cells.sweep();
      what = 'sweep';
    }
    check(`op ${op} (${what})`);
  }
  // Every request ends, every thread applies every reload: nothing is left anywhere.
  for (const q of live) threads[q.thread]!.table.end(q.limit, q.reserved, 0);
  live = [];
  threads.forEach((t, i) => apply(t, i, cells.reload));
  cells.sweep();
  check('the end');
  for (let cell = 0; cell < CELL_SETS; cell++) {
    assert.equal(Atomics.load(a, HEADER + cell * STRIDE + INFLIGHT), 0);
    assert.equal(Atomics.load(a, HEADER + cell * STRIDE + RESERVED), 0);
  }
  assert.equal(cells.synced().length, current.size, 'every retired cell set is free again');
}

test(`random runs through the limit table with 1 and 2 threads: counts never below zero, never moved between tokens, back to zero (${RUNS} runs from seed ${FIRST_SEED})`, () => {
  for (let i = 0; i < RUNS; i++) {
    const seed = FIRST_SEED + i;
    const threads = 1 + (seed % 2);
    try {
      run(seed, threads);
    } catch (err) {
      throw new Error(`SLUICE_FUZZ_SEED=${seed} SLUICE_FUZZ_RUNS=1 (threads ${threads}): ${(err as Error).message}`, { cause: err });
    }
  }
});
