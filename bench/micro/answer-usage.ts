// `node dist/bench/micro/answer-usage.js`: µs of the relaying thread's CPU that finding an answer's
// LLM token usage (src/relay/answer/answer-usage.ts) adds to finding its events (src/relay/answer/sse-events.ts),
// per read: a read of one token event (a stream at one token per read, the common case), the same
// with OpenAI's `"usage":null` in every chunk, and a 64 KiB read of many events. MICRO_N sets the
// reads per round. On a busy machine compare the fastest rounds too.
import { AnswerUsage } from '../../src/relay/answer/answer-usage.js';
import { EventScanner } from '../../src/relay/answer/sse-events.js';
import { report, time, type Timing } from './timing.js';

const N = Number(process.env['MICRO_N'] ?? 200_000);
const READ = 64 * 1024;

const kinds: [string, Buffer, number][] = [
  ['one event per read', Buffer.from('data: {"choices":[{"delta":{"content":"tok"}}]}\n\n'), N],
  ['one event per read, "usage":null', Buffer.from('data: {"id":"c","choices":[{"delta":{"content":"tok"}}],"usage":null}\n\n'), N],
  ['64 KiB read', Buffer.from('data: {"choices":[{"delta":{"content":"tok"}}]}\n\n'.repeat(Math.floor(READ / 50))), Math.max(1, Math.floor(N / 1000))],
];

const timings: Timing[] = [];
for (const [name, buf, n] of kinds) {
  const scanner = new EventScanner();
  timings.push(await time(`${name}: events`, n, () => scanner.scan(buf)));
  const scanner2 = new EventScanner();
  const usage = new AnswerUsage(true);
  timings.push(
    await time(`${name}: events + usage`, n, () => {
      scanner2.scan(buf);
      usage.scan(buf);
    }),
  );
}
report(timings);
for (let i = 0; i < timings.length; i += 2) {
  const [without, withUsage] = [timings[i]!, timings[i + 1]!];
  process.stderr.write(`${kinds[i / 2]![0]}: usage adds ${(withUsage.us - without.us).toFixed(3)} µs per read (fastest rounds: ${(withUsage.minUs - without.minUs).toFixed(3)})\n`);
}
