// The stored state a request names, and the ids an answer gives it (docs/api.md#stored-state-across-replicas):
// the Responses API's `previous_response_id` (`resp_…`) and the Conversations API's `conversation`
// (`conv_…`: a string, or an object with an `id`), which a model server such as vLLM keeps only in
// the process that made them. Read as the replica reads them (json-top-level.ts walks the body as
// Python's `json` does; the last duplicate key wins; escapes decoded). A value Sluice does not read
// (no string, longer than STATE_ID_MAX_BYTES, an object Python reads and JavaScript's JSON does not:
// `NaN`) names nothing here: the request is picked as usual, and the replica answers it as it would.
import type { KeptValue } from './json-top-level.js';
import { stringOf } from './json-values.js';

/** The longest id looked up or learned (OpenAI's and vLLM's are about 40 bytes). */
export const STATE_ID_MAX_BYTES = 256;
/** The bytes of a `conversation` object kept to read its `id`. */
export const CONVERSATION_MAX_BYTES = 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A kept string that is an id Sluice keeps (at most STATE_ID_MAX_BYTES, not empty), or undefined. */
export function idOf(v: KeptValue): string | undefined {
  if (v.count === 0 || v.kind !== 'string' || v.length > STATE_ID_MAX_BYTES) return undefined;
  const id = stringOf(v);
  return id === '' ? undefined : id;
}

/** A `conversation` value's id: the string, or the object's `id` string; undefined otherwise. */
export function conversationId(v: KeptValue): string | undefined {
  if (v.count === 0) return undefined;
  if (v.kind === 'string') return idOf(v);
  if (v.kind !== 'nested' || v.length > v.bytes.length) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(v.bytes));
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const id = (parsed as { id?: unknown }).id;
  return typeof id === 'string' && id !== '' && Buffer.byteLength(id) <= STATE_ID_MAX_BYTES ? id : undefined;
}

/** The request paths whose answers give state ids, and whose requests may name them. */
const RESPONSES = '/v1/responses';
const CONVERSATIONS = '/v1/conversations';

/** Whether a request to `path` (`{path}` of the request, no query) is to the Responses or Conversations API: its answer's ids are learned. */
export function isStatePath(path: string): boolean {
  return path.startsWith(RESPONSES) ? path.length === RESPONSES.length || path.charCodeAt(RESPONSES.length) === 0x2f : path.startsWith(CONVERSATIONS) && (path.length === CONVERSATIONS.length || path.charCodeAt(CONVERSATIONS.length) === 0x2f);
}

/** Whether a request to `path` creates a response: its body may name `previous_response_id` or `conversation`. */
export function createsResponse(path: string): boolean {
  return path === RESPONSES;
}

/**
 * The id a path names (`/v1/responses/{id}…`: retrieve, delete, cancel, input items;
 * `/v1/conversations/{id}…`: a conversation and its items), percent-decoded, or undefined.
 */
export function pathStateId(path: string): string | undefined {
  const base = path.startsWith(`${RESPONSES}/`) ? RESPONSES.length + 1 : path.startsWith(`${CONVERSATIONS}/`) ? CONVERSATIONS.length + 1 : -1;
  if (base < 0) return undefined;
  const end = path.indexOf('/', base);
  const raw = end < 0 ? path.slice(base) : path.slice(base, end);
  if (raw === '' || raw.length > 3 * STATE_ID_MAX_BYTES) return undefined;
  try {
    const id = decodeURIComponent(raw);
    return Buffer.byteLength(id) <= STATE_ID_MAX_BYTES ? id : undefined;
  } catch {
    return undefined;
  }
}
