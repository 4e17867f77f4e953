// The ids of stored state an answer gives (docs/api.md#stored-state-across-replicas), learned as the
// answer passes, so that later requests naming them go to the replica that answered
// (replicas/state-ids.ts). Only answers to the Responses and Conversations APIs' paths are looked
// at (the relay decides by path: state-ref.ts), only with a 2xx status, and only their first
// STATE_SCAN_BYTES; no other answer and no token of a long stream pays anything.
// - A JSON answer: its top-level `id` (`resp_…`, `conv_…`) and `conversation` (a string or an
//   object with an `id`), walked as json-top-level.ts walks a body, each byte once, no copy.
// - An event stream: the `response` object of its events' data lines (`response.created` comes
//   first and names the response's `id`, and its `conversation`), each line walked as it passes;
//   the look ends with the first event that names an id.
import { TopLevelWalk, type KeptValue, type ValueListener } from '../body/json-top-level.js';
import { CONVERSATION_MAX_BYTES, conversationId, idOf, STATE_ID_MAX_BYTES } from '../body/state-ref.js';
import type { Replica, ReplicaSet } from '../replica-set.js';

/** How much of an answer is looked at for its ids: the head of a response object or of a stream. */
const STATE_SCAN_BYTES = 64 * 1024;
/** How much of an event's `response` object is kept to read its `id` and `conversation` (they come first). */
const RESPONSE_KEEP_BYTES = 16 * 1024;

const ID_KEYS = ['id', 'conversation'];
const ID_KEEPS = [STATE_ID_MAX_BYTES + 1, CONVERSATION_MAX_BYTES];
const EVENT_KEYS = ['response'];
const EVENT_KEEPS = [RESPONSE_KEEP_BYTES];

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const DATA = [0x64, 0x61, 0x74, 0x61, 0x3a]; // `data:`
/** Where a stream's line stands: 0 to 4, bytes of `data:` matched at its start; then: */
const AFTER_COLON = 5;
const IN_DATA = 6;
const SKIP_LINE = 7;

export class AnswerStateIds implements ValueListener {
  private seen = 0;
  private done = false;
  /** A JSON answer's walk. */
  private readonly walk: TopLevelWalk | undefined;
  /** An event stream: its current line's state, and the walk over its data line. */
  private line = 0;
  private event: TopLevelWalk | undefined = undefined;

  constructor(
    stream: boolean,
    private readonly replicas: ReplicaSet,
    private readonly replica: Replica,
  ) {
    this.walk = stream ? undefined : new TopLevelWalk(ID_KEYS, ID_KEEPS, this);
  }

  /** The answer's next bytes, as they go to the caller. */
  scan(chunk: Buffer): void {
    if (this.done) return;
    const end = Math.min(chunk.length, STATE_SCAN_BYTES - this.seen);
    this.seen += end;
    if (this.seen >= STATE_SCAN_BYTES) this.done = true;
    const walk = this.walk;
    if (walk === undefined) this.lines(chunk, end);
    else {
      walk.feed(end === chunk.length ? chunk : chunk.subarray(0, end));
      if (walk.outcome !== 'open') this.done = true;
    }
  }

  /** A JSON answer's `id` or `conversation` was walked. */
  onValue(key: number): void {
    const v = this.walk!.values[key]!;
    this.learn(key === 0 ? idOf(v) : conversationId(v));
  }

  private learn(id: string | undefined): boolean {
    if (id === undefined) return false;
    this.replicas.learnState(this.replica, id);
    return true;
  }

  /** An event stream's bytes `chunk[0..end)`: its data lines walked for their `response`. */
  private lines(chunk: Buffer, end: number): void {
    let i = 0;
    while (i < end && !this.done) {
      const state = this.line;
      if (state === IN_DATA || state === SKIP_LINE) {
        let j = i;
        while (j < end && chunk[j] !== LF && chunk[j] !== CR) j++;
        if (state === IN_DATA && j > i) this.event!.feed(chunk.subarray(i, j));
        if (j === end) return;
        if (state === IN_DATA) this.dataLineEnded();
        this.line = 0;
        i = j + 1;
        continue;
      }
      const c = chunk[i++]!;
      if (c === LF || c === CR) this.line = 0;
      else if (state < AFTER_COLON) this.line = c === DATA[state] ? state + 1 : SKIP_LINE;
      else {
        // After `data:`: one space is skipped, the rest is the line's data.
        this.line = IN_DATA;
        this.event = new TopLevelWalk(EVENT_KEYS, EVENT_KEEPS);
        if (c !== SPACE) i--;
      }
    }
  }

  /** A data line ended: its `response` object's first bytes name the response's id (and its conversation). */
  private dataLineEnded(): void {
    const response = this.event!.values[0]!;
    this.event = undefined;
    if (response.count === 0 || response.kind !== 'nested') return;
    const inner = new TopLevelWalk(ID_KEYS, ID_KEEPS);
    inner.feed(response.bytes);
    const values: KeptValue[] = inner.values;
    const learned = this.learn(idOf(values[0]!));
    this.learn(conversationId(values[1]!));
    if (learned) this.done = true;
  }
}
