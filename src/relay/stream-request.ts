// Whether a request asks for a streamed answer (server-sent events), as docs/api.md#kept-alive-while-waiting
// puts it: an explicit `"stream": false` at the top level of its JSON body says no, whatever the
// Accept header; otherwise `"stream": true` there, or an Accept header that names
// text/event-stream, says yes. (MCP clients must send `Accept: application/json,
// text/event-stream` with every request: the header alone cannot overrule the body.) Asked only of
// a request still waiting for its replica when its service keeps such requests alive
// (waiting-comments.ts), never on the hot path.
//
// The body is read where it already is (nothing more is held for this), without parsing it into
// objects: a walk over the top-level object, byte by byte, that skips each value (nested ones by
// their depth, strings to their closing quote) until it meets the key and reads its value. A body
// still arriving is walked as it arrives: the walk keeps its state between looks (StreamFlag) and
// resumes where it stopped, so each byte is walked once however often the request is looked at.
// Limits, and why:
// - at most the first STREAM_FLAG_MAX_SCAN bytes are walked: a chat body is far smaller, and a body
//   built to be slow to walk then costs a millisecond or two, once, for a request that is still
//   waiting after `keepAliveMs`;
// - the key must be spelled `"stream"` (JSON allows `"str\u0065am"`; no client writes that);
// - a key that occurs twice counts with its last value, as JSON.parse and Python's json decide
//   (of a body still arriving, with the last value walked so far).
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
const KEY_NAME = Buffer.from('stream');
const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');

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
 * What a body says at its top level: `"stream": true`, `"stream": false`, or nothing that counts
 * (no such key, another value, not a JSON object, malformed, or only past the walked bytes).
 */
export type StreamSaid = 'true' | 'false' | 'unsaid';

// Where the walk is:
/** Before the object: spaces, then `{`. */
const BEFORE = 0;
/** After `{`: spaces, then a key or `}`. */
const FIRST_KEY = 1;
/** After `,`: spaces, then a key. */
const NEXT_KEY = 2;
/** In a key's string. */
const KEY = 3;
/** After a key: spaces, then `:`. */
const COLON_NEXT = 4;
/** After `:`: spaces, then a value. */
const VALUE = 5;
/** In a string value. */
const STRING = 6;
/** In an object or array value (`depth` deep). */
const NESTED = 7;
/** In a number or a literal, up to the next delimiter. */
const LITERAL = 8;
/** After a value: spaces, then `,` or `}`. */
const AFTER_VALUE = 9;
/** Decided: the object ended, or it is malformed or not an object (nothing more is walked). */
const DONE = 10;

/**
 * The walk over one request's body for its top-level `stream` key, kept between looks: each look
 * walks only the bytes that arrived since the last one.
 */
export class StreamFlag {
  /** Bytes of the body walked so far, each once (at most STREAM_FLAG_MAX_SCAN). */
  walked = 0;
  private state = BEFORE;
  /** What the body says so far: the value of the last `stream` key whose value was walked. */
  private said: StreamSaid = 'unsaid';
  /** In a key: how many bytes of `stream` it matched (-1: it is another key). */
  private keyMatch = 0;
  /** The value being walked is the `stream` key's. */
  private isStream = false;
  /** In a string (of a key, a value, or inside a nested value): the last byte was a backslash. */
  private escaped = false;
  /** In a nested value: its depth, and whether the walk is inside one of its strings. */
  private depth = 0;
  private inString = false;
  /** In a literal: its length, and whether it is still a prefix of `true` / `false`. */
  private literalLength = 0;
  private maybeTrue = false;
  private maybeFalse = false;

  /**
   * What the body says, or undefined while more bytes could decide it. `chunks`: the body from its
   * first byte, as far as it is held now (valid only during the call; earlier looks saw a prefix of
   * it); `final`: no more of it will be held.
   */
  look(chunks: readonly Buffer[], final: boolean): StreamSaid | undefined {
    if (this.state !== DONE) {
      // A whole body without the key is decided by one native search (most bodies).
      if (this.walked === 0 && final && chunks.length === 1 && windowOf(chunks[0]!).indexOf(STREAM_KEY) < 0) {
        this.state = DONE;
        return 'unsaid';
      }
      let offset = 0;
      for (const chunk of chunks) {
        const start = this.walked - offset;
        offset += chunk.length;
        if (start >= chunk.length) continue;
        this.walk(chunk, start, Math.min(chunk.length, start + STREAM_FLAG_MAX_SCAN - this.walked));
        if (this.state === DONE || this.walked >= STREAM_FLAG_MAX_SCAN) break;
      }
    }
    if (this.state === DONE) return this.said;
    // The object is not complete. A value of the key already walked decides (a literal cut at the
    // end of what arrived counts as complete: anything after it would make the body malformed).
    const said = this.state === LITERAL && this.isStream ? this.literal() : this.said;
    if (said !== 'unsaid' || final || this.walked >= STREAM_FLAG_MAX_SCAN) return said;
    return undefined;
  }

  /** Walks `b[i..end)`, which follows the bytes walked so far. */
  private walk(b: Buffer, i: number, end: number): void {
    const from = i;
    let state = this.state;
    while (i < end && state !== DONE) {
      let c = b[i]!;
      switch (state) {
        case BEFORE:
          if (!isSpace(c)) state = c === OPEN_OBJECT ? FIRST_KEY : this.malformed();
          break;
        case FIRST_KEY:
        case NEXT_KEY:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            state = KEY;
            this.keyMatch = 0;
          } else state = c === CLOSE_OBJECT && state === FIRST_KEY ? DONE : this.malformed();
          break;
        case KEY:
          if (this.escaped) {
            this.escaped = false;
            this.keyMatch = -1;
          } else if (c === BACKSLASH) {
            this.escaped = true;
            this.keyMatch = -1;
          } else if (c === QUOTE) {
            this.isStream = this.keyMatch === KEY_NAME.length;
            state = COLON_NEXT;
          } else if (this.keyMatch >= 0) {
            this.keyMatch = this.keyMatch < KEY_NAME.length && c === KEY_NAME[this.keyMatch] ? this.keyMatch + 1 : -1;
          }
          break;
        case COLON_NEXT:
          if (!isSpace(c)) state = c === COLON ? VALUE : this.malformed();
          break;
        case VALUE:
          if (isSpace(c)) break;
          if (c === QUOTE) state = STRING;
          else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
            state = NESTED;
            this.depth = 1;
            this.inString = false;
          } else if (c === COMMA || c === COLON || c === CLOSE_OBJECT || c === CLOSE_ARRAY) state = this.malformed();
          else {
            state = LITERAL;
            this.literalLength = 1;
            this.maybeTrue = c === TRUE[0];
            this.maybeFalse = c === FALSE[0];
          }
          break;
        case STRING:
          if (this.escaped) {
            this.escaped = false;
            break;
          }
          // Most of a body: up to the next quote or backslash in one tight loop.
          while (c !== QUOTE && c !== BACKSLASH && ++i < end) c = b[i]!;
          if (i === end) continue;
          if (c === BACKSLASH) this.escaped = true;
          else state = this.valueEnded('unsaid');
          break;
        case NESTED:
          i = this.nested(b, i, end);
          if (this.depth === 0) state = this.valueEnded('unsaid');
          continue;
        case LITERAL:
          if (c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || isSpace(c)) {
            state = this.valueEnded(this.literal());
            continue; // the delimiter is looked at again, after the value
          }
          this.maybeTrue &&= this.literalLength < TRUE.length && c === TRUE[this.literalLength];
          this.maybeFalse &&= this.literalLength < FALSE.length && c === FALSE[this.literalLength];
          this.literalLength++;
          break;
        case AFTER_VALUE:
          if (isSpace(c)) break;
          state = c === COMMA ? NEXT_KEY : c === CLOSE_OBJECT ? DONE : this.malformed();
          break;
      }
      i++;
    }
    this.state = state;
    this.walked += i - from;
  }

  /** Walks a nested value from `i` until it closes (`depth` 0) or `end`; returns where it stopped. */
  private nested(b: Buffer, i: number, end: number): number {
    let depth = this.depth;
    let inString = this.inString;
    let escaped = this.escaped;
    while (i < end) {
      const c = b[i++]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === BACKSLASH) escaped = true;
        else if (c === QUOTE) inString = false;
      } else if (c === QUOTE) inString = true;
      else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && --depth === 0) break;
    }
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    return i;
  }

  /** A value ended: the key's value is now `said`. */
  private valueEnded(said: StreamSaid): number {
    if (this.isStream) this.said = said;
    this.isStream = false;
    return AFTER_VALUE;
  }

  /** The literal walked so far, taken as complete. */
  private literal(): StreamSaid {
    if (this.maybeTrue && this.literalLength === TRUE.length) return 'true';
    if (this.maybeFalse && this.literalLength === FALSE.length) return 'false';
    return 'unsaid';
  }

  /** Not a JSON object, or malformed where the walk looked: it says nothing. */
  private malformed(): number {
    this.said = 'unsaid';
    return DONE;
  }
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The part of a body the walk may look at. */
function windowOf(body: Buffer): Buffer {
  return body.length <= STREAM_FLAG_MAX_SCAN ? body : body.subarray(0, STREAM_FLAG_MAX_SCAN);
}
