// The model a router's request names: its JSON body's top-level `"model"` (docs/api.md#routers).
// Asked once per routed request, when the body is complete or its first ROUTER_MODEL_BYTES are
// held (model-router.ts), never for a request to a service.
//
// A complete body within ROUTER_MODEL_BYTES is parsed with JSON.parse, which decides exactly what
// a replica's JSON parser would (a malformed body, a key that occurs twice: the last counts). Cost:
// one UTF-8 decode and one parse of the body; measured on this machine about 2 µs for a 1 KB chat
// body and about 2 ms for a 1 MiB one (node --test dist/test/relay/body-model.unit.test.js prints
// them; the walk below about 4 ms per MiB). A longer body, or one still arriving when its account of held bytes is full, is walked
// instead: over its held pieces, byte by byte, skipping each top-level value (nested ones by their
// depth, strings to their closing quote) up to ROUTER_MODEL_BYTES, reading the `model` key's
// string; the key must be spelled `"model"` (no escapes), and the last one walked counts.
import { MODEL_NAME_MAX_BYTES, ROUTER_MODEL_BYTES } from '../tunables.js';

/** Why a body names no model: the message of its `400 bad_request`. */
export class NoModel {
  constructor(readonly message: string) {}
}

const HOW = 'A request to a router must have a JSON object body with a string "model" (within its first 1 MiB)';
const NOT_JSON = new NoModel(`${HOW}; the body is not valid JSON.`);
const NOT_OBJECT = new NoModel(`${HOW}; the body is not a JSON object.`);
const NO_MODEL_KEY = new NoModel(`${HOW}; the body has no "model".`);
const NOT_A_STRING = new NoModel(`${HOW}; its "model" is not a string.`);
const TOO_LONG = new NoModel(`${HOW}; its "model" is longer than any model name.`);

const decoder = new TextDecoder();

/** The model `pieces` (the body from its first byte) name, or why none. `complete`: that is all of it. */
export function bodyModel(pieces: readonly Uint8Array[], complete: boolean): string | NoModel {
  let size = 0;
  for (const p of pieces) size += p.length;
  if (!complete || size > ROUTER_MODEL_BYTES) return walkForModel(pieces);
  let text = '';
  for (let i = 0; i < pieces.length; i++) text += decoder.decode(pieces[i], { stream: i < pieces.length - 1 });
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return NOT_JSON;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return NOT_OBJECT;
  const model = (body as Record<string, unknown>)['model'];
  if (model === undefined) return NO_MODEL_KEY;
  return typeof model === 'string' ? model : NOT_A_STRING;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const KEY_NAME = Buffer.from('model');

// Where the walk is (as in stream-request.ts).
const BEFORE = 0;
const FIRST_KEY = 1;
const NEXT_KEY = 2;
const KEY = 3;
const COLON_NEXT = 4;
const VALUE = 5;
const STRING = 6;
const NESTED = 7;
const LITERAL = 8;
const AFTER_VALUE = 9;

/** The prefix walk: the last top-level `"model"` string within ROUTER_MODEL_BYTES, or why none. */
export function walkForModel(pieces: readonly Uint8Array[]): string | NoModel {
  let state = BEFORE;
  let keyMatch = 0;
  let isModel = false;
  let escaped = false;
  let depth = 0;
  let inString = false;
  let found: string | NoModel = NO_MODEL_KEY;
  /** The model key's string value, as raw bytes (escapes included), while it is walked. */
  let raw: number[] | undefined;
  let left = ROUTER_MODEL_BYTES;
  for (const piece of pieces) {
    const end = Math.min(piece.length, left);
    left -= end;
    for (let i = 0; i < end; i++) {
      const c = piece[i]!;
      switch (state) {
        case BEFORE:
          if (isSpace(c)) break;
          if (c !== OPEN_OBJECT) return c === OPEN_ARRAY || c === QUOTE || isLiteralStart(c) ? NOT_OBJECT : NOT_JSON;
          state = FIRST_KEY;
          break;
        case FIRST_KEY:
        case NEXT_KEY:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            state = KEY;
            keyMatch = 0;
          } else if (c === CLOSE_OBJECT && state === FIRST_KEY) return found;
          else return NOT_JSON;
          break;
        case KEY:
          if (escaped) {
            escaped = false;
            keyMatch = -1;
          } else if (c === BACKSLASH) {
            escaped = true;
            keyMatch = -1;
          } else if (c === QUOTE) {
            isModel = keyMatch === KEY_NAME.length;
            state = COLON_NEXT;
          } else if (keyMatch >= 0) {
            keyMatch = keyMatch < KEY_NAME.length && c === KEY_NAME[keyMatch] ? keyMatch + 1 : -1;
          }
          break;
        case COLON_NEXT:
          if (isSpace(c)) break;
          if (c !== COLON) return NOT_JSON;
          state = VALUE;
          break;
        case VALUE:
          if (isSpace(c)) break;
          if (c === QUOTE) {
            state = STRING;
            raw = isModel ? [] : undefined;
          } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
            state = NESTED;
            depth = 1;
            inString = false;
          } else if (isLiteralStart(c)) state = LITERAL;
          else return NOT_JSON;
          if (isModel && c !== QUOTE) found = NOT_A_STRING;
          break;
        case STRING:
          if (escaped) escaped = false;
          else if (c === BACKSLASH) escaped = true;
          else if (c === QUOTE) {
            if (raw !== undefined) found = modelOf(raw);
            raw = undefined;
            isModel = false;
            state = AFTER_VALUE;
            break;
          }
          if (raw !== undefined) {
            if (raw.length < MODEL_NAME_MAX_BYTES) raw.push(c);
            else {
              raw = undefined;
              found = TOO_LONG;
            }
          }
          break;
        case NESTED:
          if (inString) {
            if (escaped) escaped = false;
            else if (c === BACKSLASH) escaped = true;
            else if (c === QUOTE) inString = false;
          } else if (c === QUOTE) inString = true;
          else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
          else if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && --depth === 0) {
            isModel = false;
            state = AFTER_VALUE;
          }
          break;
        case LITERAL:
          if (c === COMMA || c === CLOSE_OBJECT || isSpace(c)) {
            isModel = false;
            state = AFTER_VALUE;
            i--; // the delimiter is looked at again, after the value
          }
          break;
        case AFTER_VALUE:
          if (isSpace(c)) break;
          if (c === CLOSE_OBJECT) return found;
          if (c !== COMMA) return NOT_JSON;
          state = NEXT_KEY;
          break;
      }
    }
    if (left === 0) break;
  }
  return found;
}

/** A JSON string's raw bytes (between the quotes) as the string they spell. */
function modelOf(raw: number[]): string | NoModel {
  try {
    return JSON.parse(`"${Buffer.from(raw).toString('utf8')}"`) as string;
  } catch {
    return NOT_JSON;
  }
}

function isLiteralStart(c: number): boolean {
  return c === 0x2d || (c >= 0x30 && c <= 0x39) || c === 0x74 || c === 0x66 || c === 0x6e;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
