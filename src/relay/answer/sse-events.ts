// Where the events of a server-sent event stream end, found in the bytes as they pass through:
// no copy, no string, state carried from one read to the next so an event split anywhere over
// reads is counted once, when its last byte passes.
//
// The rules are the WHATWG HTML parser's ("server-sent events", "interpreting an event stream"),
// reduced to what counting needs:
// - A line ends with CRLF, LF or a lone CR. A CR at the end of a read is a line ending at once;
//   an LF that starts the next read is then the rest of that CRLF, not an empty line.
// - A blank line (a line ending right after another, or at the stream's start) ends an event.
// - An event counts only if it has a `data` field (`data:…`, or a line that is exactly `data`):
//   that is when a browser's EventSource dispatches one. Comments (`: ping`), and blocks of only
//   `event:`, `id:` or `retry:` lines, are not events: a replica's keep-alive comments never
//   count as tokens.
// - A UTF-8 byte order mark at the stream's start is skipped; bytes left after the last blank
//   line (an event cut short by the end of the stream) are not an event.
// - An event with a data line that is exactly `[DONE]` (`data: [DONE]`, OpenAI's end marker) is
//   an event, counted apart as well (`done`): it carries no token (answer-usage.ts).
// Byte by byte is enough: every byte the rules look at is ASCII, and in UTF-8 no byte of a
// multi-byte character is below 0x80, so a CR, LF, ':' or "data" in the bytes is one in the text.

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const DATA = [0x64, 0x61, 0x74, 0x61]; // "data"
const DONE = [0x5b, 0x44, 0x4f, 0x4e, 0x45, 0x5d]; // "[DONE]"
const BOM = [0xef, 0xbb, 0xbf];

// Where the scanner is in the current line:
/** At the start of a line, nothing of it seen yet. */
const START = 0;
// 1 to 4: that many bytes of "data" seen at the start of the line (4: the name is complete, and
// the next byte decides: ':' or a line ending makes it a data line).
/** The rest of a line whose kind is known: only its line ending matters. */
const REST = 5;
/** 6 to 8: at the stream's start, that many bytes of a byte order mark seen (minus 6). */
const IN_BOM = 6;
/** A data line's value starts: `data:` seen, then (10) its one optional space. */
const VALUE = 9;
/** 11 to 16: that many bytes of `[DONE]` seen at the start of a data line's value (minus 10). */
const IN_DONE = 10;
const DONE_SEEN = IN_DONE + DONE.length;

/** An `Content-Type` of `text/event-stream`, with or without parameters (any letter case). */
export function isEventStream(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType.length < 17) return false;
  if (contentType.length > 17) {
    const next = contentType.charCodeAt(17);
    // `;` starts the parameters; space or tab may come before it.
    if (next !== 0x3b && next !== 0x20 && next !== 0x09) return false;
  }
  return contentType.slice(0, 17).toLowerCase() === 'text/event-stream';
}

export class EventScanner {
  /** Where the current line is (START, 1–4, REST, IN_BOM…). */
  private state = IN_BOM;
  /** The event being read has a data field. */
  private hasData = false;
  /** The event being read has a data line that is exactly `[DONE]`. */
  private isDone = false;
  /** The last read ended with a CR: an LF starting the next read belongs to it. */
  private afterCR = false;
  /** Events counted so far whose data was `[DONE]` (included in what `scan` returned). */
  done = 0;

  /** Scans the next bytes of the stream; returns how many events they complete. */
  scan(buf: Buffer): number {
    const n = buf.length;
    let i = 0;
    if (this.afterCR && n > 0) {
      this.afterCR = false;
      if (buf[0] === LF) i = 1;
    }
    let state = this.state;
    let hasData = this.hasData;
    let isDone = this.isDone;
    let events = 0;
    // The next LF and the next CR at or after `i` (-1: none in this read), each found once and
    // again only when passed: a stream with one kind of line ending pays one search for the other
    // per read, and no byte is searched twice. (Searching for the LF anew at every line made a
    // stream of lone-CR lines quadratic in the read's size.)
    let lf = -2;
    let cr = -2;
    while (i < n) {
      let b: number;
      if (state !== REST) {
        b = buf[i]!;
        if (b !== LF && b !== CR) {
          if (state < 4) state = b === DATA[state] ? state + 1 : REST;
          else if (state === 4) {
            if (b === COLON) {
              hasData = true;
              state = VALUE;
            } else state = REST;
          } else if (state < VALUE) {
            if (b === BOM[state - IN_BOM]) {
              state = state === IN_BOM + 2 ? START : state + 1;
            } else {
              // Not a byte order mark: this byte starts the first line (or, after part of one,
              // the line is not a data line). Looked at again in the new state.
              state = state === IN_BOM ? START : REST;
              continue;
            }
          } else if (state === VALUE && b === SPACE) state = IN_DONE;
          else if (state < DONE_SEEN && b === DONE[state === VALUE ? 0 : state - IN_DONE]) state = state === VALUE ? IN_DONE + 1 : state + 1;
          else state = REST;
          i++;
          continue;
        }
      } else {
        if (lf !== -1 && lf < i) lf = buf.indexOf(LF, i);
        if (cr !== -1 && cr < i) cr = buf.indexOf(CR, i);
        const end = lf < 0 ? cr : cr < 0 || lf < cr ? lf : cr;
        if (end < 0) break;
        i = end;
        b = buf[i]!;
      }
      // A line ends at `i`.
      if (state === START) {
        if (hasData) {
          events++;
          hasData = false;
          if (isDone) {
            this.done++;
            isDone = false;
          }
        }
      } else if (state === 4) {
        hasData = true; // a line that is exactly "data"
      } else if (state === DONE_SEEN) {
        isDone = true;
      }
      state = START;
      i++;
      if (b === CR) {
        if (i < n) {
          if (buf[i] === LF) i++;
        } else {
          this.afterCR = true;
        }
      }
    }
    this.state = state;
    this.hasData = hasData;
    this.isDone = isDone;
    return events;
  }
}
