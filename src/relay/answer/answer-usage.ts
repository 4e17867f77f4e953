// The LLM token usage an answer reports, found in its bytes as they pass to the caller, with no
// copy of the answer and no JSON parse of it (docs/operations.md#llm-token-usage):
// - a JSON answer (Content-Type `application/json` or `…+json`, at most USAGE_JSON_MAX_BYTES):
//   its `usage` object's `prompt_tokens` and `completion_tokens`;
// - an event stream: the `usage` of the last data line that carries one (OpenAI's last chunk with
//   `stream_options.include_usage`; vLLM, SGLang and llama.cpp send one too). A stream without one
//   counts one completion token per data event, `[DONE]` aside (finished-request.ts).
//
// Each read is searched once for the bytes `"usage"`, in JavaScript by Boyer-Moore-Horspool
// (`find`): it looks at about one byte in six of JSON text, and a read of one token event costs no
// call into native code (Buffer#indexOf's call costs more than the search, and its first-byte
// search stops at every quote of the JSON). A key split over reads is found too. After a match,
// its `:` and the value's first byte are looked at where they are: a value that is not an object
// (`"usage": null`, OpenAI's chunks before the last) ends it there. Only an object is kept: at
// most USAGE_TAIL_BYTES from its `{`, in a stream up to the end of the line (an event's JSON is one
// data line). It is read when the line ends, when the tail is full, or when a JSON answer ends:
// its top-level `prompt_tokens` / `completion_tokens` that are plain integers.
//
// No false match from a string: inside a JSON string every quote is escaped, so the text `"usage"`
// in a prompt, an answer or a tool's arguments is the bytes `\"usage\"`, which do not contain
// `"usage"` (the closing quote follows a backslash, not the `e`).
import { USAGE_JSON_MAX_BYTES, USAGE_TAIL_BYTES } from '../../tunables.js';

const NEEDLE = Buffer.from('"usage"', 'latin1');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const LF = 0x0a;
const CR = 0x0d;
const PROMPT = Buffer.from('prompt_tokens', 'latin1');
const LAST = NEEDLE.length - 1;
/** Horspool's shift per byte under the needle's last place: its distance from the last place, 7 for a byte not in it. */
const SHIFT = new Uint8Array(256).fill(NEEDLE.length);
for (let k = 0; k < LAST; k++) SHIFT[NEEDLE[k]!] = LAST - k;
const COMPLETION = Buffer.from('completion_tokens', 'latin1');

/** A Content-Type of JSON: `application/json` or `application/…+json`, with or without parameters. */
export function isJson(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  // The common case without a new string: exactly `application/json`, or it and its parameters.
  if (contentType.startsWith('application/json')) {
    const next = contentType.length === 16 ? 0x3b : contentType.charCodeAt(16);
    if (next === 0x3b || next === 0x20 || next === 0x09) return true;
  }
  const semi = contentType.indexOf(';');
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/**
 * The usage finder for an answer, or undefined when its usage is not looked for: no body, or
 * neither an event stream nor JSON of at most USAGE_JSON_MAX_BYTES (`contentLength` -1: chunked).
 */
export function answerUsage(eventStream: boolean, contentType: string | undefined, contentLength: number, bodyless: boolean): AnswerUsage | undefined {
  if (bodyless) return undefined;
  if (eventStream) return new AnswerUsage(true);
  if (contentLength > USAGE_JSON_MAX_BYTES || !isJson(contentType)) return undefined;
  return new AnswerUsage(false);
}

export class AnswerUsage {
  /** The counts the answer reported; -1 until a usage object with one was read. */
  promptTokens = -1;
  completionTokens = -1;
  /** The bytes after the last `"usage"`, allocated at the first match. */
  private tail: Buffer | undefined = undefined;
  /** Bytes kept in `tail` (its usage object so far); -1 while not keeping. */
  private kept = -1;
  /** While keeping: 0 before the `:`, 1 after it, 2 from the object's `{` on. */
  private head = 0;
  /** How many bytes of `"usage"` the previous read ended with. */
  private partial = 0;
  /** A JSON answer: its bytes so far (past USAGE_JSON_MAX_BYTES nothing is counted). */
  private seen = 0;

  constructor(
    /** An event stream: a usage ends with its line. */
    private readonly stream: boolean,
  ) {}

  /** The answer reported its usage. */
  get reported(): boolean {
    return this.promptTokens >= 0;
  }

  /** The next bytes of the answer (call during the write: it may be a view of a shared buffer). */
  scan(buf: Buffer): void {
    const n = buf.length;
    if (!this.stream) {
      if (this.seen > USAGE_JSON_MAX_BYTES) return;
      this.seen += n;
      if (this.seen > USAGE_JSON_MAX_BYTES) {
        // Too long to count: whatever was read does not stand.
        this.promptTokens = this.completionTokens = -1;
        this.kept = -1;
        return;
      }
    }
    let i = 0;
    const partial = this.partial;
    if (partial > 0) {
      // The previous read ended with the start of `"usage"` (its only quote is its first byte, so
      // no other match can start inside that start).
      this.partial = 0;
      const rest = NEEDLE.length - partial;
      let k = 0;
      while (k < rest && k < n && buf[k] === NEEDLE[partial + k]) k++;
      if (k === rest) {
        this.kept = 0;
        this.head = 0;
        i = rest;
      } else if (k === n) {
        this.partial = partial + n;
        return;
      }
    }
    while (i < n) {
      if (this.kept >= 0) {
        i = this.keep(buf, i);
        continue;
      }
      const at = find(buf, i);
      if (at < 0) {
        this.partial = startOfNeedleAtEnd(buf, i);
        return;
      }
      this.kept = 0;
      this.head = 0;
      i = at + NEEDLE.length;
    }
  }

  /** The answer is over: a JSON answer's tail is read now. */
  end(): void {
    if (!this.stream && this.kept >= 0 && this.seen <= USAGE_JSON_MAX_BYTES) this.read();
    this.kept = -1;
  }

  /**
   * After `"usage"`: its `:`, then keeps its object from the `{` until the tail is full or (a
   * stream) the line ends; returns where it stopped. A value that is not an object (`"usage":
   * null`, OpenAI's chunks before the last; a string `"usage"` that is no key) stops it at that
   * byte, nothing kept or read: the search goes on from there.
   */
  private keep(buf: Buffer, i: number): number {
    const n = buf.length;
    const stream = this.stream;
    let head = this.head;
    while (head < 2) {
      if (i >= n) {
        this.head = head;
        return i;
      }
      const b = buf[i]!;
      if (b === 0x20 || b === 0x09 || (!stream && (b === LF || b === CR))) i++;
      else if (head === 0 && b === COLON) {
        head = 1;
        i++;
      } else if (head === 1 && b === 0x7b) head = 2;
      else {
        // Not an object, or (a stream) the line ended first.
        this.kept = -1;
        return i;
      }
    }
    this.head = 2;
    const tail = (this.tail ??= Buffer.allocUnsafe(USAGE_TAIL_BYTES));
    let kept = this.kept;
    while (i < n) {
      const b = buf[i]!;
      if (stream && (b === LF || b === CR)) {
        this.kept = kept;
        this.read();
        return i;
      }
      tail[kept++] = b;
      i++;
      if (kept === USAGE_TAIL_BYTES) {
        this.kept = kept;
        this.read();
        return i;
      }
    }
    this.kept = kept;
    return i;
  }

  /** Reads the kept tail; a usage with a count replaces the one before. */
  private read(): void {
    const n = this.kept;
    this.kept = -1;
    if (n <= 0) return;
    const t = this.tail!;
    // The tail starts with the object's `{`.
    let i = 1;
    let depth = 1;
    let key = true;
    let prompt = -1;
    let completion = -1;
    while (i < n && depth > 0) {
      const b = t[i]!;
      if (b === QUOTE) {
        const start = i + 1;
        i = afterString(t, start, n);
        if (i < 0) break;
        if (depth === 1 && key) {
          key = false;
          const name = sameBytes(t, start, i - 1, PROMPT) ? 1 : sameBytes(t, start, i - 1, COMPLETION) ? 2 : 0;
          let j = skipSpace(t, i, n);
          if (j >= n || t[j] !== COLON) return;
          j = skipSpace(t, j + 1, n);
          if (name !== 0) {
            const value = readCount(t, j, n);
            if (name === 1) prompt = value;
            else completion = value;
          }
          i = j;
        }
        continue;
      }
      if (b === 0x7b || b === 0x5b) depth++;
      else if (b === 0x7d || b === 0x5d) depth--;
      else if (b === COMMA && depth === 1) key = true;
      i++;
    }
    if (prompt < 0 && completion < 0) return;
    this.promptTokens = prompt < 0 ? 0 : prompt;
    this.completionTokens = completion < 0 ? 0 : completion;
  }
}

/** Where `"usage"` starts in `buf` at or after `from`, or -1. */
function find(buf: Buffer, from: number): number {
  const n = buf.length;
  let i = from + LAST;
  while (i < n) {
    const b = buf[i]!;
    if (b === QUOTE && buf[i - 6] === QUOTE && buf[i - 5] === 0x75 && buf[i - 4] === 0x73 && buf[i - 3] === 0x61 && buf[i - 2] === 0x67 && buf[i - 1] === 0x65) return i - LAST;
    i += SHIFT[b]!;
  }
  return -1;
}

/** How many bytes at the end of `buf` (from `from` on) are the start of `"usage"`. */
function startOfNeedleAtEnd(buf: Buffer, from: number): number {
  const n = buf.length;
  for (let k = Math.max(from, n - NEEDLE.length + 1); k < n; k++) {
    if (buf[k] !== QUOTE) continue;
    let m = 1;
    while (k + m < n && buf[k + m] === NEEDLE[m]) m++;
    if (k + m === n) return m;
  }
  return 0;
}

function skipSpace(t: Buffer, i: number, n: number): number {
  while (i < n) {
    const b = t[i]!;
    if (b !== 0x20 && b !== 0x09 && b !== LF && b !== CR) break;
    i++;
  }
  return i;
}

/** After the string whose content starts at `i`: the index past its closing quote, or -1 if the tail ends first. */
function afterString(t: Buffer, i: number, n: number): number {
  while (i < n) {
    const b = t[i]!;
    if (b === BACKSLASH) i += 2;
    else if (b === QUOTE) return i + 1;
    else i++;
  }
  return -1;
}

function sameBytes(t: Buffer, start: number, end: number, name: Buffer): boolean {
  if (end - start !== name.length) return false;
  for (let k = 0; k < name.length; k++) if (t[start + k] !== name[k]) return false;
  return true;
}

/** A count: a plain non-negative integer that ends inside the tail; -1 otherwise. */
function readCount(t: Buffer, i: number, n: number): number {
  let value = 0;
  let digits = 0;
  while (i < n) {
    const b = t[i]!;
    if (b < 0x30 || b > 0x39) break;
    value = value * 10 + (b - 0x30);
    digits++;
    i++;
  }
  if (digits === 0 || digits > 15 || i >= n) return -1;
  const next = t[i]!;
  return next === 0x2e || next === 0x65 || next === 0x45 ? -1 : value;
}
