// A value of a JSON body's top-level key (json-top-level.ts keeps its bytes) as the replica reads it:
// Python's `json` turns the text into a Python value, and pydantic in lax mode (vLLM's and SGLang's
// request models) turns that into the field's type. What each accepts:
// - an integer field (`max_tokens`, `max_completion_tokens`): a JSON integer; a JSON number with a
//   fraction or an exponent (a Python float) when it is whole and below 2^63 (`9e2`, `900.0`; not
//   `900.5`, `1e400`, `NaN`); `true` and `false` (1 and 0); a string holding an integer as
//   pydantic reads one (`"900"`, `" 900 "`, `"+900"`, `"0900"`, `"900.00"`, `"9_00"`; not `"9e2"`
//   or `"900.5"`); `null` for none;
// - a boolean field (`stream`): `true`, `false`, the numbers 0 and 1, and the strings pydantic
//   reads as one (`"1"`, `"yes"`, `"on"`, `"t"`, ... in any case); `null` for none (false);
// - a string field (`model`): a JSON string, its escapes decoded.
// A value kept only in part (longer than its key keeps) cannot be read here: undefined, as a value
// the replica refuses.
import type { KeptValue } from './json-top-level.js';

/** Python's `json` number grammar (a number's text whole). */
const NUMBER = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?$/;
/** A JSON integer: what pydantic parses a string as, after cleaning it. */
const JSON_INT = /^-?(?:0|[1-9]\d*)$/;
/** Pydantic takes a float as an integer below this (i64's range). */
const INT_FLOAT_BOUND = 2 ** 63;
/** What Rust's `str::trim` takes away (Unicode White_Space), as pydantic trims a string before reading an integer. */
const RUST_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;
const TRUE_STRINGS = new Set(['1', 't', 'y', 'on', 'yes', 'true']);
const FALSE_STRINGS = new Set(['0', 'f', 'n', 'no', 'off', 'false']);

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The text of a kept literal or string (a string's undecoded), or undefined when only part of it was kept. */
function textOf(v: KeptValue): string | undefined {
  if (v.length > v.bytes.length) return undefined;
  const plain = printable(v.bytes);
  if (plain !== undefined) return plain;
  try {
    return utf8.decode(v.bytes);
  } catch {
    return undefined; // Python's `json` refuses a body that is not UTF-8
  }
}

/** Bytes that are all printable ASCII but a quote or a backslash, as the string they spell (most values: a model name, a number); else undefined. */
function printable(b: Uint8Array): string | undefined {
  let s = '';
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return undefined;
    s += String.fromCharCode(c);
  }
  return s;
}

/** A kept string value, its escapes decoded; undefined when it is no string, only part of it was kept, or Python refuses it. */
export function stringOf(v: KeptValue): string | undefined {
  if (v.kind !== 'string') return undefined;
  return decoded(v);
}

/** A kept string's text, its escapes decoded (none to decode in printable ASCII); undefined when Python refuses it. */
function decoded(v: KeptValue): string | undefined {
  if (v.length > v.bytes.length) return undefined;
  const plain = printable(v.bytes);
  if (plain !== undefined) return plain;
  const raw = textOf(v);
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return undefined;
  }
}

/**
 * A kept value as an integer field reads it: the integer (any sign, as a JS number: exact up to
 * 2^53, then near enough for a bound), null for JSON `null`, undefined when the replica refuses it
 * or it cannot be read here.
 */
export function intOf(v: KeptValue): number | null | undefined {
  if (v.kind === 'nested') return undefined;
  if (v.kind === 'string') {
    const s = decoded(v);
    return s === undefined ? undefined : intOfString(s);
  }
  const text = textOf(v);
  if (text === undefined) return undefined;
  if (text === 'null') return null;
  if (text === 'true') return 1;
  if (text === 'false') return 0;
  const m = NUMBER.exec(text);
  if (m === null) return undefined; // NaN, Infinity, or no literal Python reads
  const n = Number(text) || 0; // -0 is 0
  if (m[1] === undefined && m[2] === undefined) return n; // a Python int
  // A Python float (the same double as JavaScript's): whole and within i64 for pydantic.
  return Number.isInteger(n) && Math.abs(n) < INT_FLOAT_BOUND ? n : undefined;
}

/** A string as pydantic reads an integer from it (its `str_as_int`), or undefined. */
function intOfString(s: string): number | undefined {
  if (JSON_INT.test(s)) return Number(s) || 0;
  const cleaned = cleanIntString(s);
  return cleaned !== undefined && JSON_INT.test(cleaned) ? Number(cleaned) || 0 : undefined;
}

/**
 * Pydantic's cleaning of a string before it reads an integer again: spaces trimmed, a `+` dropped,
 * leading zeros dropped, a fraction of only zeros dropped, underscores between digits dropped;
 * undefined when nothing changed (it then refuses the string).
 */
function cleanIntString(input: string): string | undefined {
  let s = input.replace(RUST_SPACE, '');
  if (s.startsWith('+')) {
    if (s[1] === '-') return undefined;
    s = s.slice(1);
  }
  let negative = false;
  if (s.startsWith('-')) {
    if (s[1] === '-' || s[1] === '+') return undefined;
    negative = true;
    s = s.slice(1);
  }
  const unpadded = withoutLeadingZeros(s);
  if (unpadded === undefined) return undefined;
  s = unpadded;
  const dot = s.indexOf('.');
  if (dot >= 0 && /^0+$/.test(s.slice(dot + 1))) s = s.slice(0, dot);
  if (!s.startsWith('_') && !s.endsWith('_') && s.includes('_') && !s.includes('__')) {
    const joined = s.replaceAll('_', '');
    return negative ? `-${joined}` : joined;
  }
  if (s.length === input.length) return undefined;
  return negative ? `-${s}` : s;
}

/** Pydantic's `strip_leading_zeros`: zeros (and underscores among them) before the first other digit, one kept before a dot or alone. */
function withoutLeadingZeros(s: string): string | undefined {
  const first = s[0];
  if (first === undefined) return undefined;
  if (first !== '0') return (first >= '1' && first <= '9') || first === '-' ? s : undefined;
  for (let i = 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '0' || c === '_') continue;
    if ((c >= '1' && c <= '9') || c === '-') return s.slice(i);
    if (c === '.') return s.slice(i - 1);
    return undefined;
  }
  return s.slice(-1);
}

/** A kept value as a boolean field reads it: true or false, null for JSON `null`, undefined when the replica refuses it. */
export function boolOf(v: KeptValue): boolean | null | undefined {
  if (v.kind === 'nested') return undefined;
  if (v.kind === 'string') {
    const s = decoded(v);
    if (s === undefined) return undefined;
    const lower = asciiLower(s);
    return TRUE_STRINGS.has(lower) ? true : FALSE_STRINGS.has(lower) ? false : undefined;
  }
  const text = textOf(v);
  if (text === undefined) return undefined;
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (text === 'null') return null;
  if (!NUMBER.test(text)) return undefined;
  const n = Number(text);
  return n === 1 ? true : n === 0 ? false : undefined;
}

/** Lower case for ASCII letters only (pydantic compares these strings ignoring ASCII case). */
function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}
