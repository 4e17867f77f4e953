// The prompt of a request as prefix-aware routing reads it (`routing.prefix`,
// docs/architecture.md#prefix-aware-routing): the top-level fields a model server prefills —
// `instructions`, `tools`, `messages`, `prompt`, `input` — cut into fixed-size blocks of
// `blockBytes`, each block's hash covering every byte before it, up to `maxBlocks` blocks.
//
// Read from the bytes as they pass (json-top-level.ts hands over each field's raw text, piece by
// piece, with nothing copied): no second parse, no tokenizer. What is hashed is a normalized form
// of each field's JSON text, so that spellings the replica's parser reads alike hash alike, where
// that is cheap (one pass, no state beyond a few integers):
// - whitespace between JSON tokens is dropped (`{"role": "user"}` = `{"role":"user"}`);
// - escapes in strings are decoded (`\u00e9` = `é` = its raw UTF-8, `\/` = `/`, `\n` = a newline
//   byte, a `\ud83d\ude00` pair = its 4-byte UTF-8), except a quote and a backslash, which stay
//   escaped so the text keeps its structure.
// Key order inside objects is kept: reordering would need a parse, and a client serializes its
// messages the same way every turn. Only whole blocks count (a prompt shorter than one block
// routes as without the policy).
//
// Each field is hashed on its own (FNV-1a over its normalized bytes, each block's hash the running
// state finished with MurmurHash3's mixer), so the body's key order does not matter and a key given
// twice counts with its last value, as the replica reads it (each value restarts its field). The
// request's chain (`hashes`) then combines them in a fixed order — instructions, tools, messages,
// prompt, input — seeded with the model name and the cache salt (`cache_salt`): block k's hash
// covers the model, the salt and every block before it.
import { hashKey } from '../../replicas/affinity-ring.js';
import { BACKSLASH, hexDigit, isSpace, QUOTE, unescaped } from './json-bytes.js';

/** The top-level keys of the prompt, in the order their blocks are chained. */
export const PROMPT_KEYS = ['instructions', 'tools', 'messages', 'prompt', 'input'] as const;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** MurmurHash3's 32-bit finalizer. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** The block hashes of one request's prompt fields, fed as they pass. */
export class PromptBlocks {
  /** Per field, its block hashes so far (made when the field first occurs) and how many. */
  private readonly blocks: (Int32Array | undefined)[] = [undefined, undefined, undefined, undefined, undefined];
  private readonly counts = new Int32Array(PROMPT_KEYS.length);
  /** The field being fed (an index into PROMPT_KEYS), or -1; its running hash and the bytes of its open block. */
  private field = -1;
  private h = 0;
  private n = 0;
  /** The field has maxBlocks blocks: the rest of it is not looked at. */
  private done = true;
  private inString = false;
  /** 0, or 1 after a backslash, or 2 to 5 while reading the four hex digits of `\u` (`code` so far). */
  private escape = 0;
  private code = 0;
  /** A `\u` high surrogate waiting for its low half (0: none). */
  private high = 0;

  constructor(
    readonly blockBytes: number,
    readonly maxBlocks: number,
  ) {}

  /** A value of prompt field `field` begins (a later one replaces an earlier: the last wins). */
  rawBegin(field: number): void {
    this.field = field;
    this.counts[field] = 0;
    this.blocks[field] ??= new Int32Array(this.maxBlocks);
    this.h = FNV_OFFSET ^ (field + 1);
    this.n = 0;
    this.done = false;
    this.inString = false;
    this.escape = 0;
    this.high = 0;
  }

  /** The next raw bytes of the field's value. */
  rawBytes(b: Uint8Array, from: number, to: number): void {
    if (this.done) return;
    let h = this.h;
    let n = this.n;
    let inString = this.inString;
    const size = this.blockBytes;
    let i = from;
    while (i < to) {
      if (this.escape !== 0 || this.high !== 0) {
        // In an escape, or after a `\u` high surrogate: one byte at a time, off the fast path.
        this.h = h;
        this.n = n;
        this.inString = inString;
        this.special(b[i++]!);
        if (this.done) return;
        h = this.h;
        n = this.n;
        inString = this.inString;
        continue;
      }
      let c = b[i]!;
      if (inString) {
        // Most bytes: a string's text up to its next quote or backslash, hashed as it is.
        while (c !== QUOTE && c !== BACKSLASH) {
          h = Math.imul(h ^ c, FNV_PRIME);
          if (++n === size) {
            this.h = h;
            if (this.blockEnds()) return;
            n = 0;
          }
          if (++i === to) break;
          c = b[i]!;
        }
        if (i === to) break;
        i++;
        if (c === BACKSLASH) {
          this.escape = 1;
          continue;
        }
        inString = false;
      } else {
        i++;
        if (isSpace(c)) continue;
        if (c === QUOTE) inString = true;
      }
      h = Math.imul(h ^ c, FNV_PRIME);
      if (++n === size) {
        this.h = h;
        if (this.blockEnds()) return;
        n = 0;
      }
    }
    this.h = h;
    this.n = n;
    this.inString = inString;
  }

  /** The field's value ended. */
  ended(): void {
    this.field = -1;
    this.done = true;
  }

  /**
   * The request's chain: the fields' blocks in PROMPT_KEYS order, seeded with `model` and `salt`,
   * at most maxBlocks; undefined when the prompt has no whole block. A fresh array.
   */
  hashes(model: string, salt: string): Int32Array | undefined {
    let total = 0;
    for (let f = 0; f < PROMPT_KEYS.length; f++) total += this.counts[f]!;
    if (total === 0) return undefined;
    const out = new Int32Array(Math.min(total, this.maxBlocks));
    let h = mix(Math.imul(hashKey(model) ^ 0x5bd1e995, FNV_PRIME) ^ hashKey(salt));
    let k = 0;
    for (let f = 0; f < PROMPT_KEYS.length && k < out.length; f++) {
      const blocks = this.blocks[f];
      for (let j = 0; j < this.counts[f]! && k < out.length; j++) {
        h = mix(Math.imul(h, FNV_PRIME) ^ blocks![j]!);
        // 0 marks an empty place in the index (prefix-index.ts).
        out[k++] = h === 0 ? 1 : h;
      }
    }
    return out;
  }

  /** A byte in an escape, or after a `\u` high surrogate. */
  private special(c: number): void {
    if (this.escape === 1) {
      if (c === 0x75) {
        this.escape = 2;
        this.code = 0;
        return;
      }
      this.escape = 0;
      const d = unescaped(c);
      // Not an escape Python reads (it refuses the body): hashed as written.
      this.char(d < 0 ? -1 : d, c);
      return;
    }
    if (this.escape >= 2) {
      const digit = hexDigit(c);
      if (digit < 0) {
        // Python refuses it too: the escape is dropped, the byte hashed as it is.
        this.escape = 0;
        this.flushHigh();
        this.plain(c);
        return;
      }
      this.code = this.code * 16 + digit;
      if (++this.escape === 6) {
        this.escape = 0;
        this.codeUnit(this.code);
      }
      return;
    }
    // A high surrogate was waiting, and this byte is no escape: it stands alone.
    if (c === BACKSLASH && this.inString) {
      this.escape = 1;
      return;
    }
    this.flushHigh();
    this.plain(c);
  }

  /** A one-character escape read: `d` (-1: none Python reads, `c` its letter). */
  private char(d: number, c: number): void {
    this.flushHigh();
    if (d < 0) {
      this.emit(BACKSLASH);
      this.emit(c);
    } else this.utf8(d);
  }

  /** A `\uXXXX` escape read. */
  private codeUnit(u: number): void {
    if (this.high !== 0) {
      const high = this.high;
      this.high = 0;
      if (u >= 0xdc00 && u <= 0xdfff) {
        this.utf8(0x10000 + ((high - 0xd800) << 10) + (u - 0xdc00));
        return;
      }
      this.utf8(high);
    }
    if (u >= 0xd800 && u <= 0xdbff) this.high = u;
    else this.utf8(u);
  }

  private flushHigh(): void {
    if (this.high === 0) return;
    const high = this.high;
    this.high = 0;
    this.utf8(high);
  }

  /** A raw byte outside an escape (the slow path's copy of the loop's). */
  private plain(c: number): void {
    if (this.inString) {
      if (c === QUOTE) this.inString = false;
    } else if (isSpace(c)) return;
    else if (c === QUOTE) this.inString = true;
    this.emit(c);
  }

  /** A decoded character, as its UTF-8 bytes (a quote and a backslash escaped, as the text writes them). */
  private utf8(cp: number): void {
    if (cp === QUOTE || cp === BACKSLASH) {
      this.emit(BACKSLASH);
      this.emit(cp);
    } else if (cp < 0x80) this.emit(cp);
    else if (cp < 0x800) {
      this.emit(0xc0 | (cp >> 6));
      this.emit(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      this.emit(0xe0 | (cp >> 12));
      this.emit(0x80 | ((cp >> 6) & 0x3f));
      this.emit(0x80 | (cp & 0x3f));
    } else {
      this.emit(0xf0 | (cp >> 18));
      this.emit(0x80 | ((cp >> 12) & 0x3f));
      this.emit(0x80 | ((cp >> 6) & 0x3f));
      this.emit(0x80 | (cp & 0x3f));
    }
  }

  private emit(c: number): void {
    if (this.done) return;
    this.h = Math.imul(this.h ^ c, FNV_PRIME);
    if (++this.n === this.blockBytes) {
      this.n = 0;
      this.blockEnds();
    }
  }

  /** A block is whole: its hash kept; true when the field has all it may. */
  private blockEnds(): boolean {
    const f = this.field;
    const count = this.counts[f]!;
    this.blocks[f]![count] = mix(this.h);
    this.counts[f] = count + 1;
    if (count + 1 < this.maxBlocks) return false;
    this.done = true;
    return true;
  }
}
