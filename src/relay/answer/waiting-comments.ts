// Keeping a request for a streamed answer alive while it waits for its replica (`queue.keepAliveMs`):
// a cold start can take minutes, and load balancers in front of the gateway cut a connection that
// stays silent for about a minute. Such a request, still without the replica's answer after
// `keepAliveMs`, gets `200 text/event-stream` at once and a comment every `keepAliveMs`; then the
// replica's event stream follows, or anything else becomes one `event: error` and a clean end.
//
// - One clock for every waiting request of the thread: the upstream deadlines' tick (ticker.ts),
//   running only while some request is watched. A request is watched from its arrival to its
//   answer's status line or its end, and no longer: one left until the next tick (up to 100 ms)
//   would be alive at young-generation collections, which then copied and promoted megabytes of
//   finished requests, for pauses of 4 to 8 ms (fact 19).
// - The watched requests are an intrusive doubly linked list through the requests themselves
//   (two fields each): linking and unlinking allocate nothing, and an unlinked request points to
//   nothing. A `Set` with a request added and deleted per request rehashed its table every few
//   hundred requests, and V8 links an old table to its successor: once one such table had been
//   promoted, dead tables in the old generation held new ones and the requests in them through
//   every scavenge, and the process promoted a fifth of all it allocated until the next full
//   collection (docs/architecture.md#fact-19).
// - Whether the request asked for a stream is looked at only when its `keepAliveMs` has passed
//   (stream-request.ts): a request answered before then costs nothing more, and is relayed exactly
//   as without the option. A body still arriving then is looked at again at each tick, its walk
//   resumed where the last one stopped (a stalled body is not walked again).
// - Once a start of the service has been measured and it is cold, the comment says when the replica
//   is expected: `: waiting for a replica (ready in about N s)` (src/replicas/expected-start.ts).
// - The comments go to the caller only: the replica's deadlines (response head, body idle) are its
//   connection's and do not see them, so a replica that stalls is still cut off in time.
import { type Ticking, unwatch, watch } from '../../time/ticker.js';
import type { CallerBody } from '../body/caller-body.js';
import { isEventStream } from './sse-events.js';
import { acceptsEventStream, type StreamLook } from '../body/stream-request.js';
import { wholeSeconds } from '../../replicas/expected-start.js';

/** The most of a replica's answer that goes into the error event's message. */
const ANSWER_MESSAGE_MAX = 4096;

/** A request the clock ticks while it waits. */
export interface KeptAlive {
  /** One tick (`now`: performance.now()); false when the request no longer waits (it is dropped). */
  keepAliveTick(now: number): boolean;
  /** The clock's list (this module's alone; undefined when not watched). */
  keepAlivePrev: KeptAlive | undefined;
  keepAliveNext: KeptAlive | undefined;
  keepAliveWatched: boolean;
}

/** What the caller receives every `keepAliveMs` while its request waits (a comment ends with a blank line). */
export const WAITING_COMMENT = ': waiting for a replica\n\n';

/** The comment for a replica expected in `leftMs` (-1: unknown, the plain comment). */
export function waitingComment(leftMs: number): string {
  return leftMs < 0 ? WAITING_COMMENT : `: waiting for a replica (ready in about ${wholeSeconds(leftMs)} s)\n\n`;
}

/** The first watched request (the most recent). */
let first: KeptAlive | undefined;
/** The clock is watched (it stops itself at a tick that finds nothing waiting). */
let ticking = false;
/** The requests of one tick, gathered first: a tick may end other requests (emptied after). */
const due: KeptAlive[] = [];

const clock: Ticking = {
  onTick() {
    const now = performance.now();
    for (let r = first; r !== undefined; r = r.keepAliveNext) due.push(r);
    // A tick may end its own request (or another) before it answers: unlinking twice must not happen.
    for (const r of due) if (r.keepAliveWatched && !r.keepAliveTick(now)) stopKeepingAlive(r);
    due.length = 0;
    if (first === undefined) {
      ticking = false;
      unwatch(clock);
    }
  },
};

function unlink(r: KeptAlive): void {
  const prev = r.keepAlivePrev;
  const next = r.keepAliveNext;
  if (prev === undefined) first = next;
  else prev.keepAliveNext = next;
  if (next !== undefined) next.keepAlivePrev = prev;
  r.keepAlivePrev = undefined;
  r.keepAliveNext = undefined;
  r.keepAliveWatched = false;
}

/** Ticks `request` until it says it no longer waits, or `stopKeepingAlive`. */
export function keepAliveWhileWaiting(request: KeptAlive): void {
  if (request.keepAliveWatched) return;
  request.keepAliveWatched = true;
  request.keepAliveNext = first;
  if (first !== undefined) first.keepAlivePrev = request;
  first = request;
  if (!ticking) {
    ticking = true;
    watch(clock);
  }
}

/** The request has its answer's status line, or is over: the clock forgets it now. */
export function stopKeepingAlive(request: KeptAlive): void {
  if (request.keepAliveWatched) unlink(request);
}

/**
 * The request asked for a streamed answer (stream-request.ts: an explicit `"stream": false` in the
 * body wins; else `"stream": true` or an Accept naming text/event-stream); undefined while the part
 * of its body that would tell is still arriving. `flag`: the request's own walk over its body,
 * resumed at every look.
 */
export function asksForStreamedAnswer(accept: string | undefined, body: CallerBody, flag: StreamLook): boolean | undefined {
  const held = body.held();
  const said = flag.look(held.chunks, held.final);
  if (said === undefined) return undefined;
  return said === 'unsaid' ? acceptsEventStream(accept) : said === 'true';
}

/** The replica's answer can follow the comments: a 2xx event stream. */
export function continuesStream(status: number, contentType: string | undefined, bodyless: boolean): boolean {
  return status >= 200 && status < 300 && !bodyless && isEventStream(contentType);
}

/** One `error` event, with an error's JSON (one line: JSON.stringify escapes line breaks). */
export function errorEvent(json: string): string {
  return `event: error\ndata: ${json}\n\n`;
}

/**
 * A replica's answer that cannot follow the comments (an error, or not an event stream), kept up
 * to ANSWER_MESSAGE_MAX bytes for the error event that replaces it.
 */
export class AnswerAsError {
  private kept: Buffer | undefined = undefined;
  private length = 0;

  constructor(readonly status: number) {}

  /** Keeps what fits of `chunk` (valid only during the call); true once no more fits. */
  add(chunk: Buffer): boolean {
    const kept = (this.kept ??= Buffer.allocUnsafe(ANSWER_MESSAGE_MAX));
    this.length += chunk.copy(kept, this.length, 0, Math.min(chunk.length, ANSWER_MESSAGE_MAX - this.length));
    return this.length === ANSWER_MESSAGE_MAX;
  }

  /** `{"error":{"code":"upstream_status","status":…,"message":…}}`: the message is the answer's text. */
  json(): string {
    const text = this.kept === undefined ? '' : this.kept.toString('utf8', 0, utf8End(this.kept, this.length));
    return JSON.stringify({ error: { code: 'upstream_status', status: this.status, message: text } });
  }
}

/** `length`, or less so that a UTF-8 character cut at the end is left out rather than mangled. */
function utf8End(b: Buffer, length: number): number {
  // Back over at most three continuation bytes to the lead byte of the last character.
  let start = length - 1;
  while (start >= 0 && start > length - 4 && (b[start]! & 0xc0) === 0x80) start--;
  if (start < 0) return length;
  const lead = b[start]!;
  const size = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return start + size > length ? start : length;
}
