// HTTP/1.1 syntax, one grammar for every layer (RFC 9110 section 5.6, RFC 9112 section 7.1): the
// response parser's character classes as lookup tables and the checks that need no parser state;
// the token as a pattern for strings (a configured method or header name, a caller's method), built
// from the same list of tchar; the host and port a replica's origin names.

export const HTAB = 9;

/** RFC 9110 section 5.6.2 tchar. */
const TCHAR = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/** A tchar's byte: 1. */
const TOKEN_BYTE = new Uint8Array(256);
for (const c of TCHAR) TOKEN_BYTE[c.charCodeAt(0)] = 1;
/** A token: one or more tchar, as a pattern for a string (the same list, `-` and `^` escaped). */
export const TOKEN = new RegExp(`^[${TCHAR.replace(/[-^]/g, '\\$&')}]+$`);
/** Field value and reason phrase bytes: HTAB, SP, VCHAR, obs-text (RFC 9110 section 5.5). */
const TEXT = new Uint8Array(256);
TEXT[HTAB] = 1;
for (let c = 0x20; c <= 0x7e; c++) TEXT[c] = 1;
for (let c = 0x80; c <= 0xff; c++) TEXT[c] = 1;
export const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 10; c++) HEX[48 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[65 + c] = 10 + c;
  HEX[97 + c] = 10 + c;
}

/** Where the name of the field line `buf[start..end)` ends: its colon, or -1 when not `token ":"`. */
export function fieldNameEnd(buf: Buffer, start: number, end: number): number {
  let colon = start;
  while (colon < end && TOKEN_BYTE[buf[colon]!] === 1) colon++;
  return colon === start || colon === end || buf[colon] !== 58 ? -1 : colon;
}

/** Why a field line starting at `start` has no valid name (`fieldNameEnd` gave -1). */
export function fieldNameProblem(buf: Buffer, start: number): string {
  // A line starting with whitespace continues the one before it (obs-fold, RFC 9112 section 5.2).
  return buf[start] === 32 || buf[start] === HTAB ? 'obs-fold in a header field' : 'invalid header field name';
}

/** Why the field value `buf[start..end)` is not HTAB, SP, VCHAR and obs-text, or undefined. */
export function fieldValueProblem(buf: Buffer, start: number, end: number): string | undefined {
  for (let i = start; i < end; i++) {
    if (TEXT[buf[i]!] === 0) return buf[i] === 13 ? 'bare CR in a header field' : 'invalid character in a header field';
  }
  return undefined;
}

/** True when `buf[start..end)` equals the lower-case ASCII `name`, ignoring case. */
export function nameIs(buf: Buffer, start: number, end: number, name: string): boolean {
  if (end - start !== name.length) return false;
  for (let i = 0; i < name.length; i++) {
    if ((buf[start + i]! | 0x20) !== name.charCodeAt(i)) return false;
  }
  return true;
}


export function hasTab(buf: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (buf[i] === HTAB) return true;
  return false;
}

/**
 * `*( ";" token [ "=" ( token / quoted-string ) ] )` (RFC 9112 section 7.1.1), or why not. The
 * optional whitespace (BWS) the RFC allows around `;` and `=` is refused, as llhttp does: no
 * replica needs it, and a chunk line two parsers read differently is how smuggling starts. The
 * reasons tell apart what llhttp lets through (an empty name or value, a value that is neither a
 * token nor one quoted string, a control character such as DEL in a quoted string) from the rest.
 */
export function chunkExtensionProblem(buf: Buffer, start: number, end: number): string | undefined {
  let i = start;
  while (i < end) {
    if (buf[i] !== 59) return 'invalid chunk extension'; // ;
    const name = ++i;
    while (i < end && TOKEN_BYTE[buf[i]!] === 1) i++;
    // `;;`, `;=v` or a `;` that ends the line.
    if (i === name) return i === end || buf[i] === 59 || buf[i] === 61 ? EMPTY_EXTENSION : 'invalid chunk extension';
    if (i === end || buf[i] === 59) continue;
    if (buf[i] !== 61) return 'invalid chunk extension'; // =
    i++;
    if (buf[i] === 34) {
      // quoted-string: qdtext or quoted-pair, up to the closing quote.
      i++;
      while (i < end && buf[i] !== 34) {
        if (buf[i] === 92) i++;
        if (i >= end) return 'invalid chunk extension';
        if (TEXT[buf[i]!] === 0) return 'control character in a chunk extension';
        i++;
      }
      if (i >= end) return 'invalid chunk extension';
      i++;
    } else {
      const value = i;
      while (i < end && TOKEN_BYTE[buf[i]!] === 1) i++;
      if (i === value) return i === end || buf[i] === 59 ? EMPTY_EXTENSION : 'invalid chunk extension';
    }
    // The value goes on past its token or its closing quote (`a=b"c"`, `a="b"c`); whitespace
    // there is the BWS refused above.
    if (i < end && buf[i] !== 59) return buf[i] === 32 || buf[i] === HTAB ? 'invalid chunk extension' : 'chunk extension value neither a token nor a quoted string';
  }
  return undefined;
}

const EMPTY_EXTENSION = 'empty chunk extension name or value';

/** The bounds of the item `listItem` found last (module state: parsing is synchronous). */
const item = { start: 0, end: 0 };

/**
 * Finds the comma-separated item of `buf[i..end)` that starts at `i`, trimmed of SP and HTAB,
 * and puts its bounds in `item` (empty when start === end). Returns where the next item starts;
 * past `end` when this was the last one.
 */
function listItem(buf: Buffer, i: number, end: number): number {
  let to = i;
  while (to < end && buf[to] !== 44) to++; // ,
  let a = i;
  let b = to;
  while (a < b && (buf[a] === 32 || buf[a] === HTAB)) a++;
  while (b > a && (buf[b - 1] === 32 || buf[b - 1] === HTAB)) b--;
  item.start = a;
  item.end = b;
  return to + 1;
}

/** `connectionOptions` bits. */
export const CONNECTION_CLOSE = 1;
export const CONNECTION_KEEP_ALIVE = 2;

/** `Connection: a, b` (trimmed value in `buf[start..end)`): which of `close` and `keep-alive` it names. */
export function connectionOptions(buf: Buffer, start: number, end: number): number {
  let options = 0;
  for (let i = start; i <= end; ) {
    i = listItem(buf, i, end);
    if (nameIs(buf, item.start, item.end, 'close')) options |= CONNECTION_CLOSE;
    else if (nameIs(buf, item.start, item.end, 'keep-alive')) options |= CONNECTION_KEEP_ALIVE;
  }
  return options;
}

/** `Keep-Alive: timeout=5, max=100`: the (last valid) timeout in seconds, or -1. */
export function keepAliveTimeout(buf: Buffer, start: number, end: number): number {
  let timeout = -1;
  for (let i = start; i <= end; ) {
    i = listItem(buf, i, end);
    if (item.end - item.start < 9 || !nameIs(buf, item.start, item.start + 8, 'timeout=')) continue;
    let n = 0;
    for (let k = item.start + 8; k < item.end && n < 1e9; k++) {
      const d = buf[k]! - 48;
      if (d < 0 || d > 9) {
        n = -1;
        break;
      }
      n = n * 10 + d;
    }
    if (n >= 0) timeout = n;
  }
  return timeout;
}

/** A Content-Length value (trimmed, `buf[start..end)`): `1*DIGIT`, at most 15 digits; -1 when invalid. */
export function contentLengthValue(buf: Buffer, start: number, end: number): number {
  if (start === end || end - start > 15) return -1;
  let n = 0;
  for (let i = start; i < end; i++) {
    const d = buf[i]! - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/** True when the bytes at `start` are exactly the ASCII `text`. */
function bytesAre(buf: Buffer, start: number, text: string): boolean {
  for (let i = 0; i < text.length; i++) if (buf[start + i] !== text.charCodeAt(i)) return false;
  return true;
}

/**
 * Why `buf[start..end)` (CRLF excluded) is not a status line Sluice accepts, or undefined:
 * `HTTP/1.0` or `HTTP/1.1`, SP, three digits (100–599, not 101: Sluice never asks to switch
 * protocols), then nothing or SP and a reason phrase of HTAB, SP, VCHAR and obs-text.
 */
export function statusLineProblem(buf: Buffer, start: number, end: number): string | undefined {
  const n = end - start;
  // llhttp skips CR and LF before a status line (RFC 9112 section 2.2 allows it for requests).
  if (n === 0 || buf[start] === 13) return 'empty line before the status line';
  if (n < 12 || !bytesAre(buf, start, 'HTTP/1.') || (buf[start + 7] !== 48 && buf[start + 7] !== 49) || buf[start + 8] !== 32) {
    return 'invalid status line';
  }
  let status = 0;
  for (let i = start + 9; i < start + 12; i++) {
    const d = buf[i]! - 48;
    if (d < 0 || d > 9) return 'invalid status line';
    status = status * 10 + d;
  }
  // llhttp takes `\r\r` after the status code as the line's end.
  if (n > 12 && buf[start + 12] !== 32) return buf[start + 12] === 13 ? 'bare CR in the status line' : 'invalid status line';
  for (let i = start + 13; i < end; i++) if (TEXT[buf[i]!] === 0) return 'invalid reason phrase';
  if (status < 100 || status > 599) return 'status code out of range';
  if (status === 101) return '101 Switching Protocols was not asked for';
  return undefined;
}

/**
 * The host (an IPv6 address without its brackets, for a socket) and the port of an `http:` URL
 * (80 when it names none).
 */
export function hostAndPort(url: URL): { host: string; port: number } {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { host, port: url.port === '' ? 80 : Number(url.port) };
}
