// A tiny timing loop for the micro-benchmarks in this folder: warm up, then time `rounds` batches
// of `n` calls (with a pause between, untimed) and report the median µs per call (the median resists a busy, shared machine).

export interface Timing {
  name: string;
  /** Median over the rounds, µs per call. */
  us: number;
  /** Fastest round, µs per call. */
  minUs: number;
}

export async function time(name: string, n: number, fn: (i: number) => void, rounds = 15): Promise<Timing> {
  for (let i = 0; i < n; i++) fn(i);
  await pause();
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) fn(i);
    perCall.push(Number(process.hrtime.bigint() - start) / 1000 / n);
    // Untimed: lets asynchronous writes (a log destination) drain, as a serving gateway would.
    await pause();
  }
  perCall.sort((a, b) => a - b);
  return { name, us: perCall[Math.floor(rounds / 2)]!, minUs: perCall[0]! };
}

function pause(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

/** One line per timing, on stderr (stdout may be the log destination being measured). */
export function report(timings: readonly Timing[]): void {
  const width = Math.max(...timings.map((t) => t.name.length));
  for (const t of timings) {
    process.stderr.write(`${t.name.padEnd(width)}  ${t.us.toFixed(3).padStart(8)} µs/call  (min ${t.minUs.toFixed(3)})\n`);
  }
}
