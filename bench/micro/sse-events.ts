// `node dist/bench/micro/sse-events.js`: µs of the relaying thread's CPU to find the events in one
// 64 KiB read of a server-sent event stream (src/relay/answer/sse-events.ts), for each kind of line
// ending, and the ratio of each to LF. Lone CR is valid SSE; a stream of lone-CR lines must cost
// about what an LF one does (at most 3x), not a search over the rest of the read per line.
// MICRO_N sets the reads per round.
import { EventScanner } from '../../src/relay/answer/sse-events.js';
import { report, time, type Timing } from './timing.js';

const N = Number(process.env['MICRO_N'] ?? 200);
const READ = 64 * 1024;

/** One read of token events, each line ended by `ending`. */
function read(ending: string): Buffer {
  const event = `data: {"choices":[{"delta":{"content":"tok"}}]}${ending}${ending}`;
  return Buffer.from(event.repeat(Math.floor(READ / event.length)));
}

const timings: Timing[] = [];
for (const [name, ending] of [['LF', '\n'], ['CRLF', '\r\n'], ['CR', '\r']] as const) {
  const buf = read(ending);
  const scanner = new EventScanner();
  timings.push(await time(`64 KiB read, ${name} endings`, N, () => scanner.scan(buf)));
}
report(timings);
const lf = timings[0]!.us;
for (const t of timings) process.stderr.write(`${t.name}: ${(t.us / lf).toFixed(2)}x LF\n`);
