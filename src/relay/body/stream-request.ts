// Whether a request asks for a streamed answer (server-sent events), as docs/api.md#kept-alive-while-waiting
// puts it: an explicit `"stream": false` at the top level of its JSON body says no, whatever the
// Accept header; otherwise `"stream": true` there, or an Accept header that names
// text/event-stream, says yes. (MCP clients must send `Accept: application/json,
// text/event-stream` with every request: the header alone cannot overrule the body.) Asked only of
// a request still waiting for its replica when its service keeps such requests alive
// (waiting-comments.ts), never on the hot path.
//
// The body is read where it already is (nothing more is held for this), without parsing it into
// objects: json-top-level.ts walks its top-level object for the key, as the replica's Python `json`
// reads it (an escaped key is the key; the last of two counts), and json-values.ts reads the value
// as pydantic reads a boolean (`true`, `1`, `"yes"`, ...; `null` is false). A body still arriving is
// walked as it arrives: the walk keeps its state between looks (StreamFlag) and resumes where it
// stopped, so each byte is walked once however often the request is looked at. A request that has
// its body's fields read anyway (a router's, a token's with tokensPerMinute: body-fields.ts) asks
// that walk instead. At most the first STREAM_FLAG_MAX_SCAN bytes are walked: a chat body is far
// smaller, and a body built to be slow to walk then costs a millisecond or two, once, for a request
// that is still waiting after `keepAliveMs`.
import { STREAM_FLAG_MAX_SCAN } from '../../tunables.js';
import { TopLevelWalk } from './json-top-level.js';
import { boolOf } from './json-values.js';

const STREAM_KEY = Buffer.from('stream');
const UNICODE_ESCAPE = Buffer.from('\\u');
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
 * What a body says at its top level: a `"stream"` that reads as true, one that reads as false, or
 * nothing that counts (no such key, a value pydantic refuses, not a JSON object, malformed, or only
 * past the walked bytes).
 */
export type StreamSaid = 'true' | 'false' | 'unsaid';

/**
 * What the body's `"stream"` (the walk's tracked key `key`) says as far as `walk` went, or undefined
 * while more bytes could decide it; `final`: no more of the body will be walked.
 */
export function streamSaid(walk: TopLevelWalk, key: number, final: boolean): StreamSaid | undefined {
  const outcome = walk.outcome;
  // Not a JSON object, or malformed where the walk looked: it says nothing.
  if (outcome === 'not-object' || outcome === 'malformed' || outcome === 'foreign') return 'unsaid';
  const v = walk.values[key]!;
  const last = v.count === 0 ? 'unsaid' : saidBy(boolOf(v));
  if (outcome === 'closed' || final) return last;
  // The object is not complete. A value of the key already walked decides, and so does `true` or
  // `false` cut at the end of what arrived (anything after it would make the body malformed).
  if (walk.openKey === key && walk.openKind === 'literal') {
    const open = Buffer.from(walk.openBytes());
    if (open.equals(TRUE)) return 'true';
    if (open.equals(FALSE)) return 'false';
    return undefined;
  }
  return last !== 'unsaid' ? last : undefined;
}

function saidBy(value: boolean | null | undefined): StreamSaid {
  return value === true ? 'true' : value === false || value === null ? 'false' : 'unsaid';
}

/** What a body's `"stream"` says, looked at as the body is held (StreamFlag, or a request's BodyFields). */
export interface StreamLook {
  look(chunks: readonly Buffer[], final: boolean): StreamSaid | undefined;
}

/**
 * The walk over one request's body for its top-level `stream` key, kept between looks: each look
 * walks only the bytes that arrived since the last one.
 */
export class StreamFlag implements StreamLook {
  private readonly top = new TopLevelWalk(['stream'], [16]);
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
    // A whole body without the word (spelled out or escaped) is decided by a native search or two (most bodies).
    if (top.walked === 0 && final && chunks.length === 1 && !mayNameStream(windowOf(chunks[0]!))) return (this.decided = 'unsaid');
    top.walkPieces(chunks, STREAM_FLAG_MAX_SCAN);
    const said = streamSaid(top, 0, final || top.walked >= STREAM_FLAG_MAX_SCAN);
    if (said !== undefined && (top.outcome !== 'open' || final || top.walked >= STREAM_FLAG_MAX_SCAN)) this.decided = said;
    return said;
  }
}

/** Whether `body` may have a key `stream`: the word, or a `\u` escape that could spell it. */
function mayNameStream(body: Buffer): boolean {
  return body.indexOf(STREAM_KEY) >= 0 || body.indexOf(UNICODE_ESCAPE) >= 0;
}

/** The part of a body the walk may look at. */
function windowOf(body: Buffer): Buffer {
  return body.length <= STREAM_FLAG_MAX_SCAN ? body : body.subarray(0, STREAM_FLAG_MAX_SCAN);
}
