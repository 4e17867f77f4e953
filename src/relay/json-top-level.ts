// One key's value at the top level of a JSON object body, found without parsing the body into
// objects: a walk over the top-level object, byte by byte, that skips each value (nested ones by
// their depth, strings to their closing quote) and notes where the key's values begin and end.
// Used for a request's `"stream"` (stream-request.ts) and a router's `"model"` (body-model.ts).
//
// The walk keeps its state between calls, so a body held in pieces, or still arriving, is walked
// piece by piece, each byte once. What it finds, as offsets into the body (from its first byte):
// - the key's last value walked to its end (a key that occurs twice counts with its last value, as
//   JSON.parse and Python's json decide), and the key's value being walked when the bytes ran out;
// - whether the object closed, the body is no object (a JSON array, string or literal), or it is
//   malformed where the walk looked (nothing more is walked then).
// The key must be spelled as given: a key with an escape (JSON allows `"str\u0065am"`) is another
// key. A literal (number, true, false, null) is delimited, not checked: it ends at the next space,
// comma or closing bracket.

/** What a value is, by its first byte. */
export type ValueKind = 'string' | 'nested' | 'literal';

/** How the walk stands: still in the object (more bytes may come), or decided. */
export type Outcome = 'open' | 'closed' | 'not-object' | 'malformed';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

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
// Decided (nothing more is walked):
const CLOSED = 10;
const NOT_OBJECT = 11;
const MALFORMED = 12;

const OUTCOMES: readonly Outcome[] = ['closed', 'not-object', 'malformed'];

/** The walk over one body's top-level object for one key. */
export class TopLevelWalk {
  /** Bytes of the body walked so far, each once. */
  walked = 0;
  /** The key's last value walked to its end: the body's bytes [lastStart, lastEnd), or -1. */
  lastStart = -1;
  lastEnd = -1;
  lastKind: ValueKind = 'literal';
  /** The key's value being walked when the bytes ran out: where it begins, or -1. */
  openStart = -1;
  openKind: ValueKind = 'literal';
  private readonly key: Buffer;
  private state = BEFORE;
  /** In a key: how many bytes of `key` it matched (-1: it is another key). */
  private keyMatch = 0;
  /** The value being walked is the key's. */
  private isKey = false;
  /** In a string (of a key, a value, or inside a nested value): the last byte was a backslash. */
  private escaped = false;
  /** In a nested value: its depth, and whether the walk is inside one of its strings. */
  private depth = 0;
  private inString = false;

  /** `key`: the top-level key looked for, as spelled in the body between its quotes. */
  constructor(key: string) {
    this.key = Buffer.from(key);
  }

  get outcome(): Outcome {
    return this.state < CLOSED ? 'open' : OUTCOMES[this.state - CLOSED]!;
  }

  /**
   * Walks what `pieces` (the body from its first byte; an earlier call saw a prefix of it) hold
   * past the bytes walked so far, up to `max` bytes of the body in all.
   */
  walkPieces(pieces: readonly Uint8Array[], max: number): void {
    let offset = 0;
    for (const piece of pieces) {
      const start = this.walked - offset;
      offset += piece.length;
      if (start >= piece.length) continue;
      this.walk(piece, start, Math.min(piece.length, start + max - this.walked));
      if (this.state >= CLOSED || this.walked >= max) break;
    }
  }

  /** Walks `b[i..end)`, which follows the bytes walked so far. */
  private walk(b: Uint8Array, i: number, end: number): void {
    const from = i;
    /** The body's offset of `b[0]`. */
    const at = this.walked - from;
    let state = this.state;
    while (i < end && state < CLOSED) {
      let c = b[i]!;
      switch (state) {
        case BEFORE:
          if (!isSpace(c)) state = c === OPEN_OBJECT ? FIRST_KEY : c === OPEN_ARRAY || c === QUOTE || isLiteralStart(c) ? NOT_OBJECT : MALFORMED;
          break;
        case FIRST_KEY:
        case NEXT_KEY:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            state = KEY;
            this.keyMatch = 0;
          } else state = c === CLOSE_OBJECT && state === FIRST_KEY ? CLOSED : MALFORMED;
          break;
        case KEY:
          if (this.escaped) {
            this.escaped = false;
            this.keyMatch = -1;
          } else if (c === BACKSLASH) {
            this.escaped = true;
            this.keyMatch = -1;
          } else if (c === QUOTE) {
            this.isKey = this.keyMatch === this.key.length;
            state = COLON_NEXT;
          } else if (this.keyMatch >= 0) {
            this.keyMatch = this.keyMatch < this.key.length && c === this.key[this.keyMatch] ? this.keyMatch + 1 : -1;
          }
          break;
        case COLON_NEXT:
          if (!isSpace(c)) state = c === COLON ? VALUE : MALFORMED;
          break;
        case VALUE:
          if (isSpace(c)) break;
          if (c === QUOTE) state = STRING;
          else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
            state = NESTED;
            this.depth = 1;
            this.inString = false;
          } else if (isLiteralStart(c)) state = LITERAL;
          else {
            state = MALFORMED;
            break;
          }
          if (this.isKey) {
            this.openStart = at + i;
            this.openKind = state === STRING ? 'string' : state === NESTED ? 'nested' : 'literal';
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
          else state = this.valueEnded(at + i + 1);
          break;
        case NESTED:
          i = this.nested(b, i, end);
          if (this.depth === 0) state = this.valueEnded(at + i);
          continue;
        case LITERAL:
          if (c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || isSpace(c)) {
            state = this.valueEnded(at + i);
            continue; // the delimiter is looked at again, after the value
          }
          break;
        case AFTER_VALUE:
          if (isSpace(c)) break;
          state = c === COMMA ? NEXT_KEY : c === CLOSE_OBJECT ? CLOSED : MALFORMED;
          break;
      }
      i++;
    }
    this.state = state;
    this.walked += i - from;
  }

  /** Walks a nested value from `i` until it closes (`depth` 0) or `end`; returns where it stopped. */
  private nested(b: Uint8Array, i: number, end: number): number {
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

  /** A value ended before the body's offset `end`: the key's last value, if it was the key's. */
  private valueEnded(end: number): number {
    if (this.isKey) {
      this.lastStart = this.openStart;
      this.lastEnd = end;
      this.lastKind = this.openKind;
      this.openStart = -1;
      this.isKey = false;
    }
    return AFTER_VALUE;
  }
}

/** The body's bytes [start, end), copied out of `pieces` (the body from its first byte). */
export function bytesOf(pieces: readonly Uint8Array[], start: number, end: number): Buffer {
  const out = Buffer.allocUnsafe(end - start);
  let offset = 0;
  for (const piece of pieces) {
    const from = Math.max(start, offset);
    const to = Math.min(end, offset + piece.length);
    if (from < to) out.set(piece.subarray(from - offset, to - offset), from - start);
    offset += piece.length;
    if (offset >= end) break;
  }
  return out;
}

function isLiteralStart(c: number): boolean {
  return c === 0x2d || (c >= 0x30 && c <= 0x39) || c === 0x74 || c === 0x66 || c === 0x6e;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
