// The bytes of JSON text as the top-level walk (json-top-level.ts) meets them: the structural
// characters, spaces, the starts of literals (Python's `NaN` and `Infinity` among them), the
// one-character and `\u` escapes of a key, and the end of a string found without looking at
// every byte of a long one.

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COLON = 0x3a;
export const COMMA = 0x2c;
export const OPEN_OBJECT = 0x7b;
export const CLOSE_OBJECT = 0x7d;
export const OPEN_ARRAY = 0x5b;
export const CLOSE_ARRAY = 0x5d;

/** Bytes of a string looked at one by one before the native search takes over. */
const SHORT_STRING = 24;
/** Buffer's native search for a byte, used on the Uint8Array views uWS hands over (no Buffer made per piece). */
const indexOf = Buffer.prototype.indexOf as (this: Uint8Array, value: number, byteOffset: number) => number;

/** `stringEnd`: the bytes ended inside the string, the last of them escaping the next byte. */
export const ENDS_ESCAPED = -2;

/**
 * In a JSON string at `b[i]` (`escaped`: the byte before `b[i]`, in an earlier piece, was an
 * escaping backslash): where its closing quote is in `b[i..end)`; -1 when the bytes end first, or
 * ENDS_ESCAPED when they end in an escape. A few bytes are looked at one by one; a longer string
 * is searched natively for its next quote, and a quote after an odd run of backslashes is escaped
 * (one found so is passed, and the search goes on).
 */
export function stringEnd(b: Uint8Array, i: number, end: number, escaped: boolean): number {
  if (escaped && ++i >= end) return -1; // this byte is the escaped one
  const low = i;
  let from = i;
  for (;;) {
    let q = from;
    const stop = Math.min(end, from + SHORT_STRING);
    while (q < stop && b[q] !== QUOTE) q++;
    if (q === stop) {
      q = stop < end ? indexOf.call(b, QUOTE, stop) : -1;
      if (q >= end) q = -1;
    }
    if (q < 0) return oddBackslashes(b, end - 1, low) ? ENDS_ESCAPED : -1;
    if (!oddBackslashes(b, q - 1, low)) return q;
    from = q + 1;
    if (from >= end) return -1;
  }
}

/** Whether the run of backslashes ending at `b[k]` (and starting no lower than `low`) is odd: then it escapes the byte after it. */
function oddBackslashes(b: Uint8Array, k: number, low: number): boolean {
  let n = 0;
  while (k >= low && b[k] === BACKSLASH) {
    n++;
    k--;
  }
  return (n & 1) === 1;
}

/** The character a one-character escape (`\n`, `\"`, ...) stands for, or -1 when Python reads none. */
export function unescaped(c: number): number {
  switch (c) {
    case QUOTE:
    case BACKSLASH:
    case 0x2f:
      return c;
    case 0x62:
      return 0x08;
    case 0x66:
      return 0x0c;
    case 0x6e:
      return 0x0a;
    case 0x72:
      return 0x0d;
    case 0x74:
      return 0x09;
    default:
      return -1;
  }
}

export function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/** A number, `true`, `false`, `null`, or Python's `NaN`, `Infinity` and `-Infinity`. */
export function isLiteralStart(c: number): boolean {
  return c === 0x2d || (c >= 0x30 && c <= 0x39) || c === 0x74 || c === 0x66 || c === 0x6e || c === 0x4e || c === 0x49;
}

export function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
