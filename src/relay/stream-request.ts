// Whether a request asks for a streamed answer (server-sent events), as docs/api.md#kept-alive-while-waiting
// puts it: an explicit `"stream": false` at the top level of its JSON body says no, whatever the
// Accept header; otherwise `"stream": true` there, or an Accept header that names
// text/event-stream, says yes. (MCP clients must send `Accept: application/json,
// text/event-stream` with every request: the header alone cannot overrule the body.) Asked only of
// a request still waiting for its replica when its service keeps such requests alive
// (waiting-comments.ts), never on the hot path.
//
// The body is read where it already is (nothing more is held for this), without parsing it into
// objects: json-top-level.ts walks its top-level object for the key. A body still arriving is
// walked as it arrives: the walk keeps its state between looks (StreamFlag) and resumes where it
// stopped, so each byte is walked once however often the request is looked at. Limits, and why:
// - at most the first STREAM_FLAG_MAX_SCAN bytes are walked: a chat body is far smaller, and a body
//   built to be slow to walk then costs a millisecond or two, once, for a request that is still
//   waiting after `keepAliveMs`;
// - the key must be spelled `"stream"` (JSON allows `"str\u0065am"`; no client writes that);
// - a key that occurs twice counts with its last value, as JSON.parse and Python's json decide
//   (of a body still arriving, with the last value walked so far).
import { STREAM_FLAG_MAX_SCAN } from '../tunables.js';
import { bytesOf, TopLevelWalk } from './json-top-level.js';

const STREAM_KEY = Buffer.from('"stream"');
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

/**
 * The walk over one request's body for its top-level `stream` key, kept between looks: each look
 * walks only the bytes that arrived since the last one.
 */
export class StreamFlag {
  private readonly top = new TopLevelWalk('stream');
  /** What the body says, once decided (nothing more is walked). */
  private decided: StreamSaid | undefined = undefined;

  /** Bytes of the body walked so far, each once (at most STREAM_FLAG_MAX_SCAN). */
  get walked(): number {
    return this.top.walked;
  }

  /**
   * What the body says, or undefined while more bytes could decide it. `chunks`: the body from its
   * first byte, as far as it is held now (valid only during the call; earlier looks saw a prefix of
   * it); `final`: no more of it will be held.
   */
  look(chunks: readonly Buffer[], final: boolean): StreamSaid | undefined {
    if (this.decided !== undefined) return this.decided;
    const top = this.top;
    // A whole body without the key is decided by one native search (most bodies).
    if (top.walked === 0 && final && chunks.length === 1 && windowOf(chunks[0]!).indexOf(STREAM_KEY) < 0) return (this.decided = 'unsaid');
    top.walkPieces(chunks, STREAM_FLAG_MAX_SCAN);
    const outcome = top.outcome;
    // Not a JSON object, or malformed where the walk looked: it says nothing.
    if (outcome === 'not-object' || outcome === 'malformed') return (this.decided = 'unsaid');
    const last = top.lastStart < 0 ? 'unsaid' : literalOf(chunks, top.lastStart, top.lastEnd);
    if (outcome === 'closed') return (this.decided = last);
    // The object is not complete. A value of the key already walked decides (a literal cut at the
    // end of what arrived counts as complete: anything after it would make the body malformed).
    const said = top.openStart >= 0 && top.openKind === 'literal' ? literalOf(chunks, top.openStart, top.walked) : last;
    if (said !== 'unsaid' || final || top.walked >= STREAM_FLAG_MAX_SCAN) return said;
    return undefined;
  }
}

/** What the value at the body's bytes [start, end) says: `true`, `false`, or nothing that counts. */
function literalOf(chunks: readonly Buffer[], start: number, end: number): StreamSaid {
  if (end - start === TRUE.length) return bytesOf(chunks, start, end).equals(TRUE) ? 'true' : 'unsaid';
  if (end - start === FALSE.length) return bytesOf(chunks, start, end).equals(FALSE) ? 'false' : 'unsaid';
  return 'unsaid';
}

/** The part of a body the walk may look at. */
function windowOf(body: Buffer): Buffer {
  return body.length <= STREAM_FLAG_MAX_SCAN ? body : body.subarray(0, STREAM_FLAG_MAX_SCAN);
}
