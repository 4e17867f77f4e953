// The model a router's request names: its JSON body's top-level `"model"` (docs/api.md#routers).
// Asked once per routed request, when the body is complete or its first ROUTER_MODEL_BYTES are
// held (model-router.ts), never for a request to a service.
//
// A complete body within ROUTER_MODEL_BYTES is parsed with JSON.parse, which decides exactly what
// a replica's JSON parser would (a malformed body, a key that occurs twice: the last counts). Cost:
// one UTF-8 decode and one parse of the body; measured on this machine about 2 µs for a 1 KB chat
// body and about 2 ms for a 1 MiB one (node --test dist/test/relay/body-model.unit.test.js prints
// them; the walk below about 1 ms per MiB). A longer body, or one still arriving when its account of held bytes is full, is walked
// instead: over its held pieces up to ROUTER_MODEL_BYTES (json-top-level.ts: each top-level value
// skipped, nested ones by their depth, strings to their closing quote), reading the `model` key's
// string; the key must be spelled `"model"` (no escapes), and the last one walked counts.
import { MODEL_NAME_MAX_BYTES, ROUTER_MODEL_BYTES } from '../tunables.js';
import { bytesOf, TopLevelWalk } from './json-top-level.js';

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

/** The prefix walk: the last top-level `"model"` string within ROUTER_MODEL_BYTES, or why none. */
export function walkForModel(pieces: readonly Uint8Array[]): string | NoModel {
  const top = new TopLevelWalk('model');
  top.walkPieces(pieces, ROUTER_MODEL_BYTES);
  const outcome = top.outcome;
  if (outcome === 'malformed') return NOT_JSON;
  if (outcome === 'not-object') return NOT_OBJECT;
  // The walk stopped in a value of the key: another value than a string, or a string already too
  // long, is what counts; a string cut short leaves the last whole one.
  if (top.openStart >= 0) {
    if (top.openKind !== 'string') return NOT_A_STRING;
    if (top.walked - top.openStart - 1 > MODEL_NAME_MAX_BYTES) return TOO_LONG;
  }
  if (top.lastStart < 0) return NO_MODEL_KEY;
  if (top.lastKind !== 'string') return NOT_A_STRING;
  // Between the quotes.
  if (top.lastEnd - top.lastStart - 2 > MODEL_NAME_MAX_BYTES) return TOO_LONG;
  return modelOf(bytesOf(pieces, top.lastStart + 1, top.lastEnd - 1));
}

/** A JSON string's raw bytes (between the quotes) as the string they spell. */
function modelOf(raw: Buffer): string | NoModel {
  try {
    return JSON.parse(`"${raw.toString('utf8')}"`) as string;
  } catch {
    return NOT_JSON;
  }
}
