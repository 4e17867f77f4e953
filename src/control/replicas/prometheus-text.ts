// Reading one metric out of a Prometheus text exposition (format 0.0.4, and the OpenMetrics text
// that model servers may answer with): the samples of exactly one metric name, summed and maxed
// over their series. Only what the load reader needs, strictly, and nothing else:
//
//   sample   = name [ blanks ] [ "{" labels "}" ] blanks value [ blanks timestamp ] [ " # " exemplar ]
//   labels   = label "=" '"' escaped value '"' { "," label "=" ... } [ "," ]
//   value    = a Go float: decimal, exponent, NaN, +Inf, -Inf (any case)
//
// - A sample of the name is a line that starts with it (after blanks), the name followed by `{`
//   or a blank: `# HELP name`, `# TYPE name`, `name_bucket`, `name_total` or `namespace:name2` are
//   other lines. Lines are found with indexOf, so the rest of a big exposition (vLLM's runs to
//   hundreds of kilobytes of histograms) is never split or scanned line by line.
// - A malformed sample of the name (an unterminated label value, a raw newline in one, a value that
//   is not a float, junk after it) is skipped and counted, never guessed at. NaN and infinite
//   values are skipped too (counted as `ignored`): a queue of +Inf requests is not a reading.
// - Label values may hold anything escaped (`\\`, `\"`, `\n`) including `}` and the metric's name.
// - Never throws, whatever the text.
//
// The UTF-8 quoted names of Prometheus 3 (`{"my.metric", a="b"}`) are not read: model servers
// expose classic names.

/** The finite samples of one metric, over its series. */
export interface MetricSamples {
  sum: number;
  max: number;
  /** Series read (finite values). */
  series: number;
  /** Samples of the name skipped: malformed, NaN or infinite. */
  ignored: number;
}

/** A Go float as Prometheus writes (and parses) sample values. */
const FLOAT_RE = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])$/;
/** A sample timestamp: milliseconds (0.0.4) or seconds with a fraction (OpenMetrics). */
const TIMESTAMP_RE = /^-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/**
 * The samples of metric `name` in `text`; undefined when the text has no well-formed, finite
 * sample of it.
 */
export function readMetric(text: string, name: string): MetricSamples | undefined {
  const out: MetricSamples = { sum: 0, max: -Infinity, series: 0, ignored: 0 };
  if (name.length === 0) return undefined;
  for (let at = text.indexOf(name); at >= 0; at = text.indexOf(name, at + name.length)) {
    if (!atLineStart(text, at)) continue;
    const after = at + name.length;
    const c = text.charCodeAt(after);
    // `{`, a blank, or the end of the line: this name; anything else is a longer name.
    if (c !== 0x7b && c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d && !Number.isNaN(c)) continue;
    const value = sampleValue(text, after);
    if (value === undefined || !Number.isFinite(value)) {
      out.ignored++;
      continue;
    }
    out.sum += value;
    if (value > out.max) out.max = value;
    out.series++;
  }
  return out.series === 0 ? undefined : out;
}

/** True when only blanks stand between the start of the line and `at`. */
function atLineStart(text: string, at: number): boolean {
  for (let i = at - 1; i >= 0; i--) {
    const c = text.charCodeAt(i);
    if (c === 0x0a) return true;
    if (c !== 0x20 && c !== 0x09) return false;
  }
  return true;
}

/**
 * The value of the sample whose name ends at `from`: labels skipped (checked), then the value,
 * then an optional timestamp and an optional exemplar. Undefined when the line is malformed.
 */
function sampleValue(text: string, from: number): number | undefined {
  let end = text.indexOf('\n', from);
  if (end < 0) end = text.length;
  if (end > from && text.charCodeAt(end - 1) === 0x0d) end--;
  let i = skipBlanks(text, from, end);
  if (text.charCodeAt(i) === 0x7b) {
    const close = labelsEnd(text, i + 1, end);
    if (close < 0) return undefined;
    i = close + 1;
  } else {
    i = from;
  }
  const rest = text.slice(i, end);
  const tokens = rest.split(/[ \t]+/);
  // tokens[0] is what stood between the name (or `}`) and the first blank: it must be empty.
  if (tokens[0] !== '' || tokens.length < 2) return undefined;
  const value = tokens[1]!;
  if (!FLOAT_RE.test(value)) return undefined;
  let next = 2;
  if (next < tokens.length && tokens[next] !== '' && tokens[next] !== '#') {
    if (!TIMESTAMP_RE.test(tokens[next]!)) return undefined;
    next++;
  }
  // What is left: nothing (a trailing blank leaves an empty token), or an exemplar after `#`.
  if (next < tokens.length && tokens[next] !== '' && tokens[next] !== '#') return undefined;
  return parseFloatValue(value);
}

/** Checks `name="value"` pairs from `i` and returns the index of the closing `}`; -1 if malformed. */
function labelsEnd(text: string, i: number, end: number): number {
  for (;;) {
    i = skipBlanks(text, i, end);
    if (i >= end) return -1;
    if (text.charCodeAt(i) === 0x7d) return i;
    const nameStart = i;
    while (i < end && isLabelChar(text.charCodeAt(i), i === nameStart)) i++;
    if (i === nameStart) return -1;
    i = skipBlanks(text, i, end);
    if (text.charCodeAt(i) !== 0x3d) return -1; // =
    i = skipBlanks(text, i + 1, end);
    if (text.charCodeAt(i) !== 0x22) return -1; // "
    i++;
    for (;;) {
      if (i >= end) return -1; // unterminated (a raw newline ends the line first)
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        const e = text.charCodeAt(i + 1);
        if (e !== 0x5c && e !== 0x22 && e !== 0x6e) return -1; // only \\, \" and \n
        i += 2;
        continue;
      }
      i++;
    }
    i = skipBlanks(text, i + 1, end);
    const c = text.charCodeAt(i);
    if (c === 0x2c) {
      i++;
      continue;
    }
    if (c === 0x7d) return i;
    return -1;
  }
}

function skipBlanks(text: string, i: number, end: number): number {
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09) break;
    i++;
  }
  return i;
}

function isLabelChar(c: number, first: boolean): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || (!first && c >= 0x30 && c <= 0x39);
}

function parseFloatValue(token: string): number {
  const lower = token.toLowerCase();
  const sign = lower.startsWith('-') ? -1 : 1;
  const bare = lower.replace(/^[+-]/, '');
  if (bare === 'nan') return NaN;
  if (bare === 'inf' || bare === 'infinity') return sign * Infinity;
  return Number(token);
}
