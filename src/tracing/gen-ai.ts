// OpenTelemetry's GenAI semantic conventions as Sluice uses them (docs/operations.md#traces): the
// attribute names (the GenAI conventions are in Development status; the names below are those of
// `@opentelemetry/semantic-conventions` 1.45.0's incubating set, pinned here rather than imported,
// as that package asks of incubating names), the operation a request's path says, and the
// answer's `"model"`.
//
// A request is OpenAI-style when its path (after the service's prefix) ends with one of the
// OpenAI API's endpoints; only those get the GenAI attributes.

export const GEN_AI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  maxTokens: 'gen_ai.request.max_tokens',
  responseModel: 'gen_ai.response.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  timeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
} as const;

/** `gen_ai.operation.name` by the path's last segments; undefined: not an OpenAI-style request. */
export function operationOf(path: string): string | undefined {
  if (path.endsWith('/chat/completions')) return 'chat';
  if (path.endsWith('/completions')) return 'text_completion';
  if (path.endsWith('/embeddings')) return 'embeddings';
  // The Responses API is a chat, as the conventions name it.
  if (path.endsWith('/responses')) return 'chat';
  return undefined;
}

const KEY = Buffer.from('"model"', 'latin1');
/** The longest model name kept. */
const MODEL_MAX = 256;

/**
 * The string value of the first `"model"` key in the first `limit` bytes of `chunk`, or undefined.
 * A telemetry label, not a decision: a value with escapes, or cut by the chunk's end, is not read.
 */
export function findModel(chunk: Buffer, limit: number): string | undefined {
  const end = Math.min(chunk.length, limit + KEY.length + MODEL_MAX + 8);
  // Searched within the first `limit` bytes only (a view, no copy).
  const at = (chunk.length > limit + KEY.length ? chunk.subarray(0, limit + KEY.length) : chunk).indexOf(KEY);
  if (at < 0 || at >= limit) return undefined;
  let i = at + KEY.length;
  while (i < end && (chunk[i] === 0x20 || chunk[i] === 0x09)) i++;
  if (chunk[i] !== 0x3a) return undefined;
  i++;
  while (i < end && (chunk[i] === 0x20 || chunk[i] === 0x09)) i++;
  if (chunk[i] !== 0x22) return undefined;
  const start = i + 1;
  for (let j = start; j < end && j - start <= MODEL_MAX; j++) {
    const c = chunk[j]!;
    if (c === 0x22) return chunk.toString('utf8', start, j);
    if (c === 0x5c || c < 0x20) return undefined;
  }
  return undefined;
}
