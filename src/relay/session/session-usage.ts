// The LLM token usage a realtime session's replica reports, found in its text messages as they
// pass (docs/operations.md#llm-token-usage): OpenAI's Realtime protocol ends each response with a
// `response.done` event whose `response.usage` has `input_tokens` and `output_tokens`; vLLM's
// realtime transcription ends each with `transcription.done`, whose `usage` has `prompt_tokens` and
// `completion_tokens`. A message is parsed only when a native search finds one of those names in
// it, and only up to USAGE_JSON_MAX_BYTES; every other message costs that search alone.
import { USAGE_JSON_MAX_BYTES } from '../../tunables.js';

const RESPONSE_DONE = Buffer.from('"response.done"');
const TRANSCRIPTION_DONE = Buffer.from('"transcription.done"');

export class SessionUsage {
  promptTokens = 0;
  completionTokens = 0;
  /** Some event reported usage. */
  reported = false;

  /** A text message from the replica. */
  scan(message: Buffer): void {
    if (message.length > USAGE_JSON_MAX_BYTES) return;
    const response = message.indexOf(RESPONSE_DONE) >= 0;
    if (!response && message.indexOf(TRANSCRIPTION_DONE) < 0) return;
    let event: unknown;
    try {
      event = JSON.parse(message.toString());
    } catch {
      return;
    }
    if (!isObject(event)) return;
    if (event['type'] === 'response.done') {
      const usage = isObject(event['response']) ? event['response']['usage'] : undefined;
      if (isObject(usage)) this.add(usage['input_tokens'], usage['output_tokens']);
    } else if (event['type'] === 'transcription.done' && isObject(event['usage'])) {
      this.add(event['usage']['prompt_tokens'], event['usage']['completion_tokens']);
    }
  }

  private add(prompt: unknown, completion: unknown): void {
    const p = count(prompt);
    const c = count(completion);
    if (p === undefined && c === undefined) return;
    this.promptTokens += p ?? 0;
    this.completionTokens += c ?? 0;
    this.reported = true;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A token count as the replica's own JSON has it: an integer ≥ 0 (also written as 12.0). */
function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}
