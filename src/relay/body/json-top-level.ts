// The values of a few keys at the top level of a JSON object body, found without parsing the body
// into objects: a walk over the top-level object, byte by byte, that skips each value (nested ones
// by their depth, strings to their closing quote) and keeps a copy of the values of the keys it
// tracks. Used for a request's `"stream"` (stream-request.ts) and for the fields a router or a
// limited token reads (body-fields.ts: `model`, `stream`, `max_tokens`, `max_completion_tokens`).
//
// The walk keeps its state between calls, so a body held in pieces, or still arriving, is walked
// piece by piece, each byte once, and nothing of a piece is kept but the tracked values' bytes. It
// reads the object as Python's `json` does (the parser of vLLM and SGLang), wherever that parser
// accepts the body (docs/architecture.md#fact-20):
// - keys are compared decoded: `"m\u006fdel"` is `model`;
// - a key that occurs twice counts with its last value (each value's end is also told to a
//   listener, so a reader can tell a later value from an earlier one);
// - literals include `NaN`, `Infinity` and `-Infinity`, which Python's `json` accepts;
// - a UTF-8 byte order mark is skipped, and a body Python would decode as UTF-16 or UTF-32 (a zero
//   in its first two bytes, or their byte order marks) is `foreign`: it is not walked.
// It is more lenient than Python's `json` where that cannot change what a key reads (a literal is
// delimited, not checked; an escape in a value is skipped, not checked): a body Python refuses is
// refused by the replica whatever the walk made of it.

import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, COLON, COMMA, ENDS_ESCAPED, hexDigit, isLiteralStart, isSpace, OPEN_ARRAY, OPEN_OBJECT, QUOTE, stringEnd, unescaped } from './json-bytes.js';

/** What a value is, by its first byte. */
export type ValueKind = 'string' | 'nested' | 'literal';

/** How the walk stands: still in the object (more bytes may come), or decided. */
export type Outcome = 'open' | 'closed' | 'not-object' | 'malformed' | 'foreign';

/** Told each time a value of a tracked key was walked to its end. */
export interface ValueListener {
  onValue(key: number): void;
}

/**
 * Given the raw text of the values of some tracked keys (`rawKeys`), as it passes: a value's
 * bytes from its first (a string's opening quote, a nested value's bracket) to its last, in one
 * or more calls per piece, after `rawBegin`; its end is the listener's `onValue`. Nothing is copied.
 */
export interface RawValueSink {
  rawBegin(key: number): void;
  rawBytes(b: Uint8Array, from: number, to: number): void;
}

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
/** In a UTF-8 byte order mark at the body's start (`bom` bytes of it seen). */
const BOM = 10;
// Decided (nothing more is walked):
const CLOSED = 11;
const NOT_OBJECT = 12;
const MALFORMED = 13;
const FOREIGN = 14;

const OUTCOMES: readonly Outcome[] = ['closed', 'not-object', 'malformed', 'foreign'];
const KINDS: readonly ValueKind[] = ['string', 'nested', 'literal'];
const UTF8_BOM = [0xef, 0xbb, 0xbf];

/** The last value walked to its end of one tracked key. */
export class KeptValue {
  /** Values of the key walked to their end (a key that occurs twice: 2). */
  count = 0;
  kind: ValueKind = 'literal';
  /** Its bytes: a string's between its quotes, undecoded; a literal's or a nested value's text. */
  bytes: Uint8Array = EMPTY;
  /** Its length in bytes (a string's between its quotes); more than `bytes` holds when it was longer than the key keeps. */
  length = 0;
}

const EMPTY = new Uint8Array(0);

/** The walk over one body's top-level object for the keys it tracks. */
export class TopLevelWalk {
  /** Bytes of the body walked so far, each once. */
  walked = 0;
  /** Per tracked key (in the order given), its last value walked to its end. */
  readonly values: KeptValue[];
  /** The tracked key whose value was being walked when the bytes ran out, or -1; its kind. */
  openKey = -1;
  openKind: ValueKind = 'literal';
  /** The part of that value walked so far (bytes as `KeptValue.length` counts them). */
  openLength = 0;

  /** Per tracked key, its name's UTF-16 code units. */
  private readonly keys: readonly string[];
  /** Per tracked key, the most bytes of a value it keeps. */
  private readonly keeps: readonly number[];
  private state = BEFORE;
  /** In a key: the tracked keys it may still be (a bit each), and how many characters of them it matched. */
  private candidates = 0;
  private matched = 0;
  /** In a key: 0, or 1 after a backslash, or 2 to 5 while reading the four hex digits of `\u` (`code` so far). */
  private escape = 0;
  private code = 0;
  /** The tracked key whose value follows (after its colon), or -1. */
  private key = -1;
  /** The kind of the value being walked (an index into KINDS). */
  private kind = 0;
  /** In a string value, or inside a nested value: the last byte was a backslash. */
  private escaped = false;
  /** In a nested value: its depth, and whether the walk is inside one of its strings. */
  private depth = 0;
  private inString = false;
  private bom = 0;
  /** The tracked value being walked: its bytes so far (up to what its key keeps). */
  private kept: Uint8Array = EMPTY;

  /**
   * `keys`: the top-level keys looked for (ASCII names); `keeps`: for each, the most bytes of its
   * value kept (a longer value is measured, not kept). `listener` is told of each value's end.
   */
  constructor(
    keys: readonly string[],
    keeps: readonly number[],
    private readonly listener?: ValueListener,
    /** Told the raw text of the values of the keys in `rawKeys` (a bit per key index). */
    private readonly raw?: RawValueSink,
    private readonly rawKeys = 0,
  ) {
    this.keys = keys;
    this.keeps = keeps;
    this.values = keys.map(() => new KeptValue());
  }

  get outcome(): Outcome {
    return this.state < CLOSED ? 'open' : OUTCOMES[this.state - CLOSED]!;
  }

  /** The part of the open value walked so far that was kept (see `openKey`); valid until the next walk. */
  openBytes(): Uint8Array {
    return this.openKey < 0 ? EMPTY : this.kept.subarray(0, Math.min(this.openLength, this.keeps[this.openKey]!));
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

  /** Walks the whole of `b`, the body's next bytes after those walked so far. */
  feed(b: Uint8Array): void {
    if (this.state < CLOSED) this.walk(b, 0, b.length);
  }

  /** Walks `b[i..end)`, which follows the bytes walked so far. */
  private walk(b: Uint8Array, i: number, end: number): void {
    const from = i;
    let state = this.state;
    // The first two bytes say which encoding Python's `json` reads the body in.
    if (this.walked < 2 && i < end && this.foreign(b, i, end)) {
      this.state = FOREIGN;
      return;
    }
    /** Where the tracked value being walked begins in `b`, or -1. */
    let keptFrom = this.key >= 0 && (state === STRING || state === LITERAL || state === NESTED) ? i : -1;
    /** Where the raw text of a value the sink is told of begins in `b`, or -1. */
    let rawFrom = this.key >= 0 && (state === STRING || state === NESTED || state === LITERAL) && this.isRaw(this.key) ? i : -1;
    while (i < end && state < CLOSED) {
      let c = b[i]!;
      switch (state) {
        case BEFORE:
          if (isSpace(c)) break;
          if (c === UTF8_BOM[0] && this.walked + i - from === 0) {
            state = BOM;
            this.bom = 1;
          } else state = c === OPEN_OBJECT ? FIRST_KEY : c === OPEN_ARRAY || c === QUOTE || isLiteralStart(c) ? NOT_OBJECT : MALFORMED;
          break;
        case BOM:
          state = c === UTF8_BOM[this.bom] ? (++this.bom === 3 ? BEFORE : BOM) : MALFORMED;
          break;
        case FIRST_KEY:
        case NEXT_KEY:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            // Most keys: whole in this piece and without an escape, compared at once.
            let q = i + 1;
            while (q < end && b[q] !== QUOTE && b[q] !== BACKSLASH) q++;
            if (q < end && b[q] === QUOTE) {
              this.key = this.keyOf(b, i + 1, q);
              state = COLON_NEXT;
              i = q;
              break;
            }
            state = KEY;
            this.candidates = (1 << this.keys.length) - 1;
            this.matched = 0;
            this.escape = 0;
          } else state = c === CLOSE_OBJECT && state === FIRST_KEY ? CLOSED : MALFORMED;
          break;
        case KEY:
          if (this.candidates === 0 && this.escape === 0) {
            // Another key: up to its closing quote in one tight loop (an escape is skipped whole).
            while (c !== QUOTE && c !== BACKSLASH && ++i < end) c = b[i]!;
            if (i === end) continue;
            if (c === BACKSLASH) this.escape = 1;
            else {
              this.key = -1;
              state = COLON_NEXT;
            }
            break;
          }
          if (this.escape === 0) {
            if (c === QUOTE) {
              this.key = this.keyMatched();
              state = COLON_NEXT;
            } else if (c === BACKSLASH) this.escape = 1;
            else this.keyChar(c < 0x80 ? c : -1);
          } else if (this.escape === 1) {
            if (c === 0x75) {
              this.escape = 2;
              this.code = 0;
            } else {
              this.escape = 0;
              this.keyChar(unescaped(c));
            }
          } else {
            const digit = hexDigit(c);
            if (digit < 0) {
              // Not an escape Python reads (it refuses the body): the key is none of those tracked,
              // and the byte is looked at again as part of the key.
              this.escape = 0;
              this.candidates = 0;
              continue;
            }
            this.code = this.code * 16 + digit;
            if (++this.escape === 6) {
              this.escape = 0;
              this.keyChar(this.code);
            }
          }
          break;
        case COLON_NEXT:
          if (!isSpace(c)) state = c === COLON ? VALUE : MALFORMED;
          break;
        case VALUE:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            state = STRING;
            this.escaped = false;
          } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
            state = NESTED;
            this.depth = 1;
            this.inString = false;
            this.escaped = false;
          } else if (isLiteralStart(c)) state = LITERAL;
          else {
            state = MALFORMED;
            break;
          }
          if (this.key >= 0) {
            if (this.isRaw(this.key)) {
              rawFrom = i;
              this.raw!.rawBegin(this.key);
            }
            this.kind = state === STRING ? 0 : state === NESTED ? 1 : 2;
            this.openLength = 0;
            // A string's bytes begin after its quote, a literal's and a nested value's with this byte.
            keptFrom = state === STRING ? i + 1 : i;
          }
          break;
        case STRING: {
          // Most of a body: up to the closing quote at once (stringEnd).
          const q = this.stringEnd(b, i, end);
          if (q < 0) {
            i = end;
            continue;
          }
          i = q;
          if (rawFrom >= 0) rawFrom = this.rawTo(b, rawFrom, i + 1);
          state = this.valueEnded(b, keptFrom, i);
          keptFrom = -1;
          break;
        }
        case NESTED:
          i = this.nested(b, i, end);
          if (this.depth === 0) {
            if (rawFrom >= 0) rawFrom = this.rawTo(b, rawFrom, i);
            state = this.valueEnded(b, keptFrom, i);
            keptFrom = -1;
          }
          continue;
        case LITERAL:
          if (c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || isSpace(c)) {
            if (rawFrom >= 0) rawFrom = this.rawTo(b, rawFrom, i);
            state = this.valueEnded(b, keptFrom, i);
            keptFrom = -1;
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
    // The bytes ran out inside a tracked value: what this piece holds of it is kept.
    if (keptFrom >= 0 && state < CLOSED) this.keep(b, keptFrom, i);
    if (rawFrom >= 0 && state < CLOSED) this.raw!.rawBytes(b, rawFrom, i);
    this.openKey = state === STRING || state === NESTED || state === LITERAL ? this.key : -1;
    this.openKind = KINDS[this.kind]!;
    this.state = state;
    this.walked += i - from;
  }

  private isRaw(key: number): boolean {
    return (this.rawKeys & (1 << key)) !== 0;
  }

  /** Tells the sink the raw text `b[from..to)` of the value ending at `to`; -1 (no raw value open). */
  private rawTo(b: Uint8Array, from: number, to: number): number {
    this.raw!.rawBytes(b, from, to);
    return -1;
  }

  /** Whether the body's first two bytes, of which `b[i..end)` holds some, make Python's `json` read it as UTF-16 or UTF-32. */
  private foreign(b: Uint8Array, i: number, end: number): boolean {
    for (let at = this.walked; at < 2 && i < end; at++, i++) {
      const c = b[i]!;
      if (c === 0 || (at === 0 && (c === 0xfe || c === 0xff))) return true;
    }
    return false;
  }

  /** The tracked key whose name is `b[from..to)` (no escape in it), or -1. */
  private keyOf(b: Uint8Array, from: number, to: number): number {
    const length = to - from;
    for (let k = 0; k < this.keys.length; k++) {
      const key = this.keys[k]!;
      if (key.length !== length) continue;
      let i = 0;
      while (i < length && key.charCodeAt(i) === b[from + i]) i++;
      if (i === length) return k;
    }
    return -1;
  }

  /** One decoded character of a key (-1: none a tracked key has). */
  private keyChar(c: number): void {
    let candidates = this.candidates;
    for (let k = 0; k < this.keys.length; k++) {
      const bit = 1 << k;
      if ((candidates & bit) !== 0 && this.keys[k]!.charCodeAt(this.matched) !== c) candidates &= ~bit;
    }
    this.candidates = candidates;
    this.matched++;
  }

  /** At a key's closing quote: the tracked key it spelled, or -1. */
  private keyMatched(): number {
    for (let k = 0; k < this.keys.length; k++) if ((this.candidates & (1 << k)) !== 0 && this.keys[k]!.length === this.matched) return k;
    return -1;
  }

  /** Adds `b[from..to)` to the tracked value being walked (up to what its key keeps). */
  private keep(b: Uint8Array, from: number, to: number): void {
    const room = this.keeps[this.key]!;
    const have = this.openLength;
    this.openLength += to - from;
    if (have >= room) return;
    const end = Math.min(to, from + room - have);
    const need = have + end - from;
    if (this.kept.length < need) {
      // Grown as needed (small typed arrays are cheap to make; most values are a few bytes).
      const kept = new Uint8Array(Math.min(room, Math.max(need, 2 * this.kept.length, 32)));
      kept.set(this.kept.subarray(0, have));
      this.kept = kept;
    }
    for (let i = from; i < end; i++) this.kept[have + i - from] = b[i]!;
  }

  /** Walks a nested value from `i` until it closes (`depth` 0) or `end`; returns where it stopped. */
  private nested(b: Uint8Array, i: number, end: number): number {
    let depth = this.depth;
    while (i < end) {
      if (this.inString) {
        const q = this.stringEnd(b, i, end);
        if (q < 0) return end;
        this.inString = false;
        i = q + 1;
        continue;
      }
      const c = b[i++]!;
      if (c === QUOTE) {
        this.inString = true;
        this.escaped = false;
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && --depth === 0) {
        this.depth = 0;
        return i;
      }
      this.depth = depth;
    }
    this.depth = depth;
    return i;
  }

  /** In a string at `b[i]`: where its closing quote is in `b[i..end)`, or -1 when the bytes end first (`escaped` then kept for the next piece). */
  private stringEnd(b: Uint8Array, i: number, end: number): number {
    const q = stringEnd(b, i, end, this.escaped);
    this.escaped = q === ENDS_ESCAPED;
    return q < 0 ? -1 : q;
  }

  /**
   * A value ended before `b[to]`: the key's last value, if it was a tracked key's (its bytes in
   * this piece from `keptFrom`, -1: none; those of earlier pieces kept already).
   */
  private valueEnded(b: Uint8Array, keptFrom: number, to: number): number {
    const k = this.key;
    if (k >= 0) {
      const v = this.values[k]!;
      const room = this.keeps[k]!;
      v.count++;
      v.kind = KINDS[this.kind]!;
      if (keptFrom < 0) v.bytes = EMPTY;
      else if (this.openLength === 0) {
        // The whole value in this piece (most): copied from it at once.
        v.bytes = b.slice(keptFrom, Math.min(to, keptFrom + room));
        this.openLength = to - keptFrom;
      } else {
        this.keep(b, keptFrom, to);
        v.bytes = this.kept.slice(0, Math.min(this.openLength, room));
      }
      v.length = this.openLength;
      this.openLength = 0;
      this.key = -1;
      this.listener?.onValue(k);
    }
    return AFTER_VALUE;
  }
}
