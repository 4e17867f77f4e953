// The fields Sluice reads out of a request's JSON body (docs/api.md#reading-a-body): a router's
// `"model"`, the `"max_tokens"` and `"max_completion_tokens"` a token with tokensPerMinute reserves,
// `"stream"` (for keep-alive comments), the stored state a Responses API request names
// (`"previous_response_id"`, `"conversation"`: state-ref.ts), and with prefix-aware routing the
// prompt's blocks (prompt-blocks.ts: the prompt fields' raw text passes through the same walk) and
// `"cache_salt"`. Read as the replica reads them (json-top-level.ts walks
// the body as Python's `json` does, json-values.ts reads each value as pydantic does), or refused
// with `400 bad_request` where Sluice cannot be sure.
//
// One walk, fed by caller-body.ts with each piece as it arrives (each byte once, nothing of a piece
// kept but these values). The request decides once its body's first part is held (whole, or its
// first ROUTER_MODEL_BYTES): the model it is routed by (`model`), the tokens it reserves
// (`reservation`). The walk goes on over the rest as it streams to the replica, and a later value
// of the same key that says otherwise (another model; more tokens than reserved, or no integer)
// sets `refused` before the piece that ends it is written: the replica's request is cut before the
// body it would read is complete.
import { type KeptValue, type RawValueSink, TopLevelWalk, type ValueListener } from './json-top-level.js';
import { PROMPT_KEYS, type PromptBlocks } from './prompt-blocks.js';
import { intOf, stringOf } from './json-values.js';
import { type StreamLook, type StreamSaid, streamSaid } from './stream-request.js';
import type { RequestedFields } from '../../tracing/request-trace.js';
import { CONVERSATION_MAX_BYTES, conversationId, idOf, STATE_ID_MAX_BYTES } from './state-ref.js';

/** The longest model name read from a body (a longer value is no model any service serves). */
const MODEL_NAME_MAX_BYTES = 1024;

const MODEL = 0;
const STREAM = 1;
const MAX_TOKENS = 2;
const MAX_COMPLETION_TOKENS = 3;
const PREVIOUS_RESPONSE = 4;
const CONVERSATION = 5;
const KEYS = ['model', 'stream', 'max_tokens', 'max_completion_tokens', 'previous_response_id', 'conversation'];
/** The bytes of each key's value kept: a model name at most, a boolean's or an integer's text (with room for spaces and zeros), an id, a conversation object. */
const KEEPS = [MODEL_NAME_MAX_BYTES, 16, 64, 64, STATE_ID_MAX_BYTES + 1, CONVERSATION_MAX_BYTES];
/** With prefix-aware routing: the prompt fields (their text goes to PromptBlocks, nothing kept), then the cache salt. */
const PROMPT = KEYS.length;
const SALT = PROMPT + PROMPT_KEYS.length;
const SALT_MAX_BYTES = 1024;
const PROMPT_FIELDS = [...KEYS, ...PROMPT_KEYS, 'cache_salt'];
const PROMPT_KEEPS = [...KEEPS, ...PROMPT_KEYS.map(() => 0), SALT_MAX_BYTES];
const PROMPT_RAW = ((1 << PROMPT_KEYS.length) - 1) << PROMPT;

/** Why a body names no model a router can route by: the message of its `400 bad_request`. */
export class NoModel {
  constructor(readonly message: string) {}
}

const HOW = 'A request to a router must have a JSON object body with a string "model" (within its first 1 MiB)';
const NOT_JSON = new NoModel(`${HOW}; the body is not valid JSON.`);
const NOT_OBJECT = new NoModel(`${HOW}; the body is not a JSON object.`);
const NOT_UTF8 = new NoModel(`${HOW}; the body is not UTF-8 (a JSON body in UTF-16 or UTF-32 is not read).`);
const NO_MODEL_KEY = new NoModel(`${HOW}; the body has no "model".`);
const NOT_A_STRING = new NoModel(`${HOW}; its "model" is not a string.`);
const TOO_LONG = new NoModel(`${HOW}; its "model" is longer than any model name.`);
const TWICE = new NoModel(`${HOW}; its "model" is given twice, with different values.`);
const MODEL_AGAIN = 'The body names "model" again after the part it was routed by, with another value.';
const TOKENS_NOT_UTF8 = 'The body of a request limited in tokens (tokensPerMinute, tokensPerDay, tokensPerMonth) must be UTF-8 (a JSON body in UTF-16 or UTF-32 is not read).';
const MORE_THAN_RESERVED = 'The body asks for more tokens ("max_tokens", "max_completion_tokens") after the part its reservation was read from.';

function notAnInteger(key: string): string {
  return `The body's "${key}" is not an integer a replica reads (or is too long to read), and the request is limited in tokens (tokensPerMinute, tokensPerDay, tokensPerMonth).`;
}

export class BodyFields implements ValueListener, RawValueSink, StreamLook, RequestedFields {
  private readonly walk: TopLevelWalk;
  /** The first model value walked (decoded), to tell a second one that differs. */
  private firstModel: string | undefined = undefined;
  /** The last model value walked, decoded (undefined: none, or no string Python reads). */
  private lastModel: string | undefined = undefined;
  private twoModels = false;
  /** The model the request was routed by, once routed. */
  private routed: string | undefined = undefined;
  /** The tokens reserved, once decided (-1: not yet), and the limit they were capped at. */
  private reserved = -1;
  private cap = 0;
  /** Why the rest of the body contradicts what was decided from its first part (the 400's message), or undefined. */
  refused: string | undefined = undefined;

  /** With `prompt` (prefix-aware routing), the prompt fields' text is hashed as it passes. */
  constructor(private readonly prompt?: PromptBlocks) {
    this.walk = prompt === undefined ? new TopLevelWalk(KEYS, KEEPS, this) : new TopLevelWalk(PROMPT_FIELDS, PROMPT_KEEPS, this, this, PROMPT_RAW);
  }

  /** Walks the body's next piece; false once a value in it contradicts what was decided (`refused`). */
  feed(piece: Uint8Array): boolean {
    this.walk.feed(piece);
    return this.refused === undefined;
  }

  rawBegin(key: number): void {
    this.prompt!.rawBegin(key - PROMPT);
  }

  rawBytes(b: Uint8Array, from: number, to: number): void {
    this.prompt!.rawBytes(b, from, to);
  }

  onValue(key: number): void {
    if (key >= PROMPT && key < SALT) this.prompt!.ended();
    else if (key === MODEL) this.modelWalked(this.walk.values[MODEL]!);
    else if ((key === MAX_TOKENS || key === MAX_COMPLETION_TOKENS) && this.reserved >= 0 && this.refused === undefined) {
      const asked = this.asked();
      if (typeof asked === 'string') this.refused = asked;
      else if (Math.min(asked, this.cap) > this.reserved) this.refused = MORE_THAN_RESERVED;
    }
  }

  private modelWalked(v: KeptValue): void {
    const decoded = stringOf(v);
    this.lastModel = decoded;
    // A value that is no string, or cannot be decoded, differs from every other.
    const model = decoded ?? `\u0000${v.count}`;
    if (this.routed !== undefined) {
      if (model !== this.routed && this.refused === undefined) this.refused = MODEL_AGAIN;
    } else if (this.firstModel === undefined) this.firstModel = model;
    else if (model !== this.firstModel) this.twoModels = true;
  }

  /**
   * The model the body's part walked so far names (a router's request, once its first part is
   * held), or why none; `complete`: that part is the whole body.
   */
  model(complete: boolean): string | NoModel {
    const walk = this.walk;
    const outcome = walk.outcome;
    if (outcome === 'malformed' || (complete && outcome === 'open')) return NOT_JSON;
    if (outcome === 'not-object') return NOT_OBJECT;
    if (outcome === 'foreign') return NOT_UTF8;
    if (this.twoModels) return TWICE;
    // The walk stopped in a value of the key: another value than a string, or a string already too
    // long, is what counts; a string cut short leaves the last whole one (checked when it ends).
    if (walk.openKey === MODEL) {
      if (walk.openKind !== 'string') return NOT_A_STRING;
      if (walk.openLength > MODEL_NAME_MAX_BYTES) return TOO_LONG;
    }
    const v = walk.values[MODEL]!;
    if (v.count === 0) return NO_MODEL_KEY;
    if (v.kind !== 'string') return NOT_A_STRING;
    if (v.length > MODEL_NAME_MAX_BYTES) return TOO_LONG;
    // The last value walked was decoded as it ended (a single one is the first).
    const model = this.lastModel;
    if (model === undefined) return NOT_JSON;
    this.routed = model;
    return model;
  }

  /**
   * The tokens a request limited in tokens reserves, read from its body's part walked so far: the
   * larger of its `max_tokens` and `max_completion_tokens` (0 without them), at most `cap` (its
   * smallest limit of tokens); or the message of the 400 when one of them is no integer. Later values are checked
   * against it (`refused`).
   */
  reservation(cap: number): number | string {
    if (this.walk.outcome === 'foreign') return TOKENS_NOT_UTF8;
    const asked = this.asked();
    if (typeof asked === 'string') return asked;
    this.cap = cap;
    this.reserved = Math.min(asked, cap);
    return this.reserved;
  }

  /**
   * The prompt's block hashes (prompt-blocks.ts), seeded with the model and the cache salt as far
   * as the body was walked; undefined without prefix-aware routing or a whole block of prompt.
   */
  /** Whether the prompt is hashed in the blocks of `prefix` (a routed request's service: model-router.ts). */
  hashesPromptFor(prefix: { blockBytes: number; maxBlocks: number } | undefined): boolean {
    const p = this.prompt;
    return prefix !== undefined && p !== undefined && p.blockBytes === prefix.blockBytes && p.maxBlocks === prefix.maxBlocks;
  }

  promptBlocks(): Int32Array | undefined {
    const prompt = this.prompt;
    if (prompt === undefined) return undefined;
    const salt = this.walk.values[SALT]!;
    return prompt.hashes(this.lastModel ?? '', salt.count === 0 ? '' : (stringOf(salt) ?? '\u0000'));
  }

  /** The last `"model"` walked, decoded (a traced request's `gen_ai.request.model`: tracing/request-trace.ts). */
  get requestedModel(): string | undefined {
    return this.lastModel;
  }

  /** The tokens the body asks for at most (`max_tokens`, `max_completion_tokens`), or undefined: none, or not an integer. */
  requestedMaxTokens(): number | undefined {
    const asked = this.asked();
    return typeof asked === 'number' && asked > 0 ? asked : undefined;
  }

  /**
   * The id of the stored state the body's part walked so far names (state-ref.ts): its
   * `previous_response_id` when that is a string, else its `conversation`'s; undefined for none.
   */
  stateId(): string | undefined {
    const values = this.walk.values;
    return idOf(values[PREVIOUS_RESPONSE]!) ?? conversationId(values[CONVERSATION]!);
  }

  /** The larger of the integers the body's `max_tokens` and `max_completion_tokens` say (each its last value), or the 400's message. */
  private asked(): number | string {
    let most = 0;
    for (let key = MAX_TOKENS; key <= MAX_COMPLETION_TOKENS; key++) {
      const v = this.walk.values[key]!;
      if (v.count === 0) continue;
      const n = intOf(v);
      if (n === undefined) return notAnInteger(KEYS[key]!);
      if (n !== null && n > most) most = n;
    }
    return most;
  }

  /**
   * What the body's `"stream"` says, as far as it was walked (stream-request.ts); `final`: no more
   * of it will be held. Its pieces were walked as they came: `chunks` is not looked at again.
   */
  look(_chunks: readonly Buffer[], final: boolean): StreamSaid | undefined {
    return streamSaid(this.walk, STREAM, final);
  }
}
