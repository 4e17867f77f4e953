// The Prometheus text sample grammar (format 0.0.4, and the OpenMetrics text that model servers may
// answer with), for the load reader's scanner (metric-scanner.ts), which finds the lines of the
// names it reads and hands over what follows the name on such a line. Only what the load reader
// needs, strictly, and nothing else:
//
//   sample   = name [ blanks ] [ "{" labels "}" ] blanks value [ blanks timestamp ] [ " # " exemplar ]
//   labels   = label "=" '"' escaped value '"' { "," label "=" ... } [ "," ]
//   value    = a Go float: decimal, exponent, NaN, +Inf, -Inf (any case)
//
// - A malformed sample (an unterminated label value, a value that is not a float, junk after it)
//   yields undefined: the scanner skips and counts it, never guesses at it.
// - Label values may hold anything escaped (`\\`, `\"`, `\n`) including `}` and the metric's name.
// - Never throws, whatever the text.
//
// The UTF-8 quoted names of Prometheus 3 (`{"my.metric", a="b"}`) are not read: model servers
// expose classic names.

/** A Go float as Prometheus writes (and parses) sample values. */
const FLOAT_RE = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])$/;
/** A sample timestamp: milliseconds (0.0.4) or seconds with a fraction (OpenMetrics). */
const TIMESTAMP_RE = /^-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/**
 * The value of a sample given what follows its name on its line (`rest`: no line break): labels
 * skipped (checked), then the value, then an optional timestamp and an optional exemplar.
 * Undefined when the line is malformed; NaN and infinities are returned as such.
 */
export function sampleValue(rest: string): number | undefined {
  const end = rest.length;
  let i = skipBlanks(rest, 0, end);
  if (rest.charCodeAt(i) === 0x7b) {
    const close = labelsEnd(rest, i + 1, end);
    if (close < 0) return undefined;
    i = close + 1;
  } else {
    i = 0;
  }
  const tokens = rest.slice(i).split(/[ \t]+/);
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
