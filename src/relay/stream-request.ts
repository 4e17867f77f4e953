// Whether a request asks for a streamed answer (server-sent events): its Accept header names
// text/event-stream, or its body is a JSON object with `"stream": true` at the top level, as
// OpenAI-style clients send. Asked only of a request still waiting for its replica when its
// service keeps such requests alive (keep-alive.ts), never on the hot path.
//
// The body is read where it already is (nothing more is held for this), without parsing it into
// objects: a search for the bytes `"stream"` (native, so a body without them costs next to nothing),
// then, if they occur, a walk over the top-level object that skips each value (strings by
// searching for their closing quote) until it meets the key. Limits, and why:
// - at most the first STREAM_FLAG_MAX_SCAN bytes are walked: a chat body is far smaller, and a body built to
//   be slow to walk (a megabyte of `[`, of `\"`, of tiny strings) costs about 10 ms at most, once,
//   for a request that is still waiting after `keepAliveMs`;
// - the key must be spelled `"stream"` (JSON allows `"str\u0065am"`; no client writes that);
// - a key that occurs twice counts with its last value, as JSON.parse and Python's json decide.
import { STREAM_FLAG_MAX_SCAN } from '../tunables.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const STREAM_KEY = Buffer.from('"stream"');
const TRUE = Buffer.from('true');

/** The Accept header lists `text/event-stream` (in any case, with any parameters but `q=0`). */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  for (const range of accept.split(',')) {
    const params = range.split(';');
    if (params[0]!.trim().toLowerCase() !== 'text/event-stream') continue;
    const q = params.slice(1).find((p) => p.trim().toLowerCase().startsWith('q='));
    if (q === undefined || Number(q.trim().slice(2)) > 0) return true;
  }
  return false;
}

/**
 * Whether `body` (what has arrived of it; `final`: no more of it will be seen) is a JSON object
 * whose top-level `stream` is `true`. Undefined when more bytes could still decide it.
 */
export function asksForStream(body: Buffer, final: boolean): boolean | undefined {
  // Without the key, a complete body is decided at once (a body still arriving is walked: its
  // object may be complete already).
  if (final && body.indexOf(STREAM_KEY) < 0) return false;
  const end = Math.min(body.length, STREAM_FLAG_MAX_SCAN);
  const undecided = final || body.length > STREAM_FLAG_MAX_SCAN ? false : undefined;
  let found = false;
  let i = skipSpace(body, 0, end);
  if (i >= end) return undecided;
  if (body[i] !== OPEN_OBJECT) return false;
  i = skipSpace(body, i + 1, end);
  if (i < end && body[i] === CLOSE_OBJECT) return false;
  for (;;) {
    // A key.
    if (i >= end) return found || undecided;
    if (body[i] !== QUOTE) return false;
    const keyEnd = stringEnd(body, i, end);
    if (keyEnd < 0) return found || undecided;
    const isStream = keyEnd - i === STREAM_KEY.length && body.compare(STREAM_KEY, 0, STREAM_KEY.length, i, keyEnd) === 0;
    i = skipSpace(body, keyEnd, end);
    if (i >= end) return found || undecided;
    if (body[i] !== COLON) return false;
    i = skipSpace(body, i + 1, end);
    // Its value.
    const valueEnd = skipValue(body, i, end);
    if (valueEnd < 0) return valueEnd === INCOMPLETE ? found || undecided : false;
    if (isStream) found = valueEnd - i === TRUE.length && body.compare(TRUE, 0, TRUE.length, i, valueEnd) === 0;
    i = skipSpace(body, valueEnd, end);
    if (i >= end) return found || undecided;
    if (body[i] === CLOSE_OBJECT) return found;
    if (body[i] !== COMMA) return false;
    i = skipSpace(body, i + 1, end);
  }
}

const INCOMPLETE = -1;
const MALFORMED = -2;

function skipSpace(b: Buffer, i: number, end: number): number {
  while (i < end) {
    const c = b[i]!;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** After the string opening at `i`, or INCOMPLETE. */
function stringEnd(b: Buffer, i: number, end: number): number {
  let from = i + 1;
  for (;;) {
    const quote = b.indexOf(QUOTE, from);
    if (quote < 0 || quote >= end) return INCOMPLETE;
    let backslashes = 0;
    for (let k = quote - 1; k > i && b[k] === BACKSLASH; k--) backslashes++;
    if ((backslashes & 1) === 0) return quote + 1;
    from = quote + 1;
  }
}

/** After the value starting at `i`, INCOMPLETE, or MALFORMED (checked only as far as skipping needs). */
function skipValue(b: Buffer, i: number, end: number): number {
  if (i >= end) return INCOMPLETE;
  const c = b[i]!;
  if (c === QUOTE) return stringEnd(b, i, end);
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    let depth = 0;
    while (i < end) {
      const d = b[i]!;
      if (d === QUOTE) {
        i = stringEnd(b, i, end);
        if (i < 0) return INCOMPLETE;
        continue;
      }
      if (d === OPEN_OBJECT || d === OPEN_ARRAY) depth++;
      else if (d === CLOSE_OBJECT || d === CLOSE_ARRAY) {
        if (--depth === 0) return i + 1;
      }
      i++;
    }
    return INCOMPLETE;
  }
  if (c === COMMA || c === COLON || c === CLOSE_OBJECT || c === CLOSE_ARRAY) return MALFORMED;
  // A number or a literal: up to the next delimiter, or the end of what has arrived (a `true`
  // cut there is taken as complete: anything after it would make the body malformed).
  while (i < end) {
    const d = b[i]!;
    if (d === COMMA || d === CLOSE_OBJECT || d === CLOSE_ARRAY || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) return i;
    i++;
  }
  return i;
}
