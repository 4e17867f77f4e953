// `{path}` safety (docs/api.md#the-url). The path and query are forwarded verbatim, never decoded
// or re-encoded, so everything a replica or a proxy in front of it might decode into something
// else is refused here instead: dot segments, encoded separators, control characters, `#`.
// One pass over the characters, no allocation on the accepted path.

/** Why a target was refused, for the error message (the caller sees it). */
export type PathProblem =
  | 'dot segment'
  | 'encoded slash or backslash'
  | 'backslash'
  | 'empty first segment (//)'
  | 'control character'
  | 'fragment (#)'
  | 'character that must be percent-encoded'
  | 'malformed percent-encoding';

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[0x30 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[0x41 + i] = 10 + i;
  HEX[0x61 + i] = 10 + i;
}

function hexAt(s: string, i: number): number {
  const c = s.charCodeAt(i);
  return c < 128 ? HEX[c]! : -1;
}

/**
 * True if `s[from, to)` is `.` or `..`, with any dot written as `%2e` or `%2E`, alone or followed
 * by path parameters (`..;x`, `..%3bx`): servlet containers and some proxies strip the parameters
 * and then resolve the dots.
 */
function isDotSegment(s: string, from: number, to: number): boolean {
  let dots = 0;
  let i = from;
  while (i < to) {
    const c = s.charCodeAt(i);
    if (c === 0x2e) {
      i += 1;
    } else if (c === 0x25 && i + 2 < to && hexAt(s, i + 1) === 2 && (s.charCodeAt(i + 2) | 0x20) === 0x65) {
      i += 3;
    } else if (dots > 0 && (c === 0x3b || (c === 0x25 && i + 2 < to && hexAt(s, i + 1) === 3 && (s.charCodeAt(i + 2) | 0x20) === 0x62))) {
      return true;
    } else {
      return false;
    }
    dots += 1;
    if (dots > 2) return false;
  }
  return dots > 0;
}

/**
 * Checks `{path}` (it begins with `/`; the router made sure) and returns the first problem found,
 * or undefined when the path is safe to forward.
 */
export function pathProblem(path: string): PathProblem | undefined {
  const length = path.length;
  if (length > 1 && path.charCodeAt(1) === 0x2f) return 'empty first segment (//)';
  let segmentStart = 1;
  for (let i = 1; i < length; i++) {
    const c = path.charCodeAt(i);
    if (c === 0x2f) {
      if (isDotSegment(path, segmentStart, i)) return 'dot segment';
      segmentStart = i + 1;
    } else if (c === 0x25) {
      const high = i + 2 < length ? hexAt(path, i + 1) : -1;
      const low = high >= 0 ? hexAt(path, i + 2) : -1;
      if (low < 0) return 'malformed percent-encoding';
      const byte = (high << 4) | low;
      if (byte < 0x20 || byte === 0x7f) return 'control character';
      if (byte === 0x2f || byte === 0x5c) return 'encoded slash or backslash';
      i += 2;
    } else if (c === 0x5c) {
      return 'backslash';
    } else if (c === 0x23) {
      return 'fragment (#)';
    } else if (c < 0x20 || c === 0x7f) {
      return 'control character';
    } else if (c === 0x20 || c > 0x7e) {
      return 'character that must be percent-encoded';
    }
  }
  if (isDotSegment(path, segmentStart, length)) return 'dot segment';
  return undefined;
}

/**
 * Checks the raw request target (path and query, as uWS gives them) for bytes that make the
 * request line invalid (RFC 9112 section 3.2: a request-target is visible ASCII, and never holds
 * `#`). uWS lets some through; such a request is refused like ambiguous framing, whatever its
 * route, so nothing pipelined behind it runs.
 */
export function targetProblem(url: string, query: string | undefined): PathProblem | undefined {
  return rawProblem(url) ?? (query === undefined ? undefined : rawProblem(query));
}

function rawProblem(s: string): PathProblem | undefined {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x23) return 'fragment (#)';
    if (c < 0x20 || c === 0x7f) return 'control character';
    if (c === 0x20 || c > 0x7e) return 'character that must be percent-encoded';
  }
  return undefined;
}
