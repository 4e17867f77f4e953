// Reading the configured metrics out of a Prometheus exposition as its body arrives, chunk by
// chunk, in one pass for every name at once (docs/configuration.md#the-model-servers-own-queue):
//
// - Lines are found with Buffer.indexOf on each chunk as it comes; no string of the body and no
//   concatenation of it is ever made. The bytes are read as latin1 (metric names are ASCII).
// - A line longer than LOAD_LINE_MAX_BYTES (4 KiB) is skipped without being split or copied: at
//   most that many bytes of an unfinished line are carried to the next chunk, in one buffer
//   allocated with the scanner. A hostile endpoint's megabytes on one line cost one memchr.
// - A sample of a name is a line that starts with it (after blanks), the name followed by `{`, a
//   blank or the end of the line: `# HELP name`, `name_bucket` or `namespace:name2` are other
//   lines. Only such lines become strings, for the sample grammar (prometheus-text.ts), and at most
//   LOAD_MAX_SERIES (1,000) per name per reading; samples beyond are counted as ignored, unread.
// - A malformed sample, a NaN or an infinite value is skipped and counted (`ignored`): a queue of
//   +Inf requests is not a reading.
// - Work per chunk is bounded by the chunk (at most a socket read, 64 KiB) and done in the turn
//   that delivered it. Never throws, whatever the bytes.
import { sampleValue } from './prometheus-text.js';

/** Lines longer than this (in bytes, without the line break) are skipped, never copied or split. */
const LOAD_LINE_MAX_BYTES = 4 * 1024;

/** Series of one metric read per reading; samples beyond are counted as ignored. */
const LOAD_MAX_SERIES = 1_000;

/** The finite samples of one metric, over its series. */
export interface MetricSamples {
  sum: number;
  max: number;
  /** Series read (finite values). */
  series: number;
  /** Samples of the name skipped: malformed, NaN or infinite, or beyond the series cap. */
  ignored: number;
}

export class MetricScanner {
  /** The names, as latin1 bytes. */
  private readonly names: Buffer[];
  /** The longest name's length: a longer token is no name. */
  private readonly longest: number;
  private readonly sums: Float64Array;
  private readonly maxes: Float64Array;
  private readonly series: Uint32Array;
  private readonly ignored: Uint32Array;
  /** The start of a line the last chunk did not finish. */
  private readonly carry = Buffer.allocUnsafe(LOAD_LINE_MAX_BYTES);
  private carried = 0;
  /** True while the rest of an over-long line is being passed over. */
  private skipping = false;

  /** `names`: the metrics to read, by index (duplicates read the same lines twice). */
  constructor(names: readonly string[]) {
    this.names = names.map((n) => Buffer.from(n, 'latin1'));
    this.longest = this.names.reduce((m, n) => Math.max(m, n.length), 0);
    this.sums = new Float64Array(names.length);
    this.maxes = new Float64Array(names.length);
    this.series = new Uint32Array(names.length);
    this.ignored = new Uint32Array(names.length);
    this.reset();
  }

  /** Forgets what was read: a new exposition starts. */
  reset(): void {
    this.sums.fill(0);
    this.maxes.fill(-Infinity);
    this.series.fill(0);
    this.ignored.fill(0);
    this.carried = 0;
    this.skipping = false;
  }

  /** Reads the lines `chunk` ends; keeps the start of an unfinished one (up to the line limit). */
  write(chunk: Buffer): void {
    const n = chunk.length;
    let from = 0;
    while (from < n) {
      const nl = chunk.indexOf(0x0a, from);
      if (nl < 0) {
        this.hold(chunk, from, n);
        return;
      }
      if (this.skipping) {
        this.skipping = false;
      } else if (this.carried > 0) {
        const length = this.carried + (nl - from);
        if (length <= LOAD_LINE_MAX_BYTES) {
          chunk.copy(this.carry, this.carried, from, nl);
          this.line(this.carry, 0, length);
        }
        this.carried = 0;
      } else if (nl - from <= LOAD_LINE_MAX_BYTES) {
        this.line(chunk, from, nl);
      }
      from = nl + 1;
    }
  }

  /** The body ended: a last line without a line break is read too. */
  end(): void {
    if (!this.skipping && this.carried > 0) this.line(this.carry, 0, this.carried);
    this.carried = 0;
    this.skipping = false;
  }

  /** The samples of name `i` read so far; undefined when there is no finite one. */
  samples(i: number): MetricSamples | undefined {
    const series = this.series[i] ?? 0;
    if (series === 0) return undefined;
    return { sum: this.sums[i]!, max: this.maxes[i]!, series, ignored: this.ignored[i]! };
  }

  private hold(chunk: Buffer, from: number, to: number): void {
    if (this.skipping) return;
    const length = this.carried + (to - from);
    if (length > LOAD_LINE_MAX_BYTES) {
      this.skipping = true;
      this.carried = 0;
      return;
    }
    chunk.copy(this.carry, this.carried, from, to);
    this.carried = length;
  }

  /** One line, `buf[start, end)`, without its line break. */
  private line(buf: Buffer, start: number, end: number): void {
    if (end > start && buf[end - 1] === 0x0d) end--;
    let i = start;
    while (i < end && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
    if (i >= end || buf[i] === 0x23) return; // blank, or a comment (# HELP, # TYPE, # EOF)
    // The name: up to `{`, a blank or the end of the line, and no longer than the longest name.
    const limit = Math.min(end, i + this.longest + 1);
    let j = i;
    while (j < limit) {
      const c = buf[j];
      if (c === 0x7b || c === 0x20 || c === 0x09) break;
      j++;
    }
    const length = j - i;
    if (length === 0 || length > this.longest) return;
    for (let k = 0; k < this.names.length; k++) {
      const name = this.names[k]!;
      if (name.length === length && name[0] === buf[i] && buf.compare(name, 0, length, i, j) === 0) this.sample(k, buf, j, end);
    }
  }

  /** A sample of name `k`; what follows the name is `buf[from, end)`. */
  private sample(k: number, buf: Buffer, from: number, end: number): void {
    if (this.series[k]! >= LOAD_MAX_SERIES) {
      this.ignored[k] = this.ignored[k]! + 1;
      return;
    }
    const value = sampleValue(buf.toString('latin1', from, end));
    if (value === undefined || !Number.isFinite(value)) {
      this.ignored[k] = this.ignored[k]! + 1;
      return;
    }
    this.sums[k] = this.sums[k]! + value;
    if (value > this.maxes[k]!) this.maxes[k] = value;
    this.series[k] = this.series[k]! + 1;
  }
}
