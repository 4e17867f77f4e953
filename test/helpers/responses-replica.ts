// A model server that, like vLLM, keeps the Responses API's stored responses and its conversations
// only in its own memory: a request naming a `previous_response_id` or a `conversation` it did not
// make gets `404`, as vLLM answers one that reached another replica. Answers in JSON, or as the
// Responses API's event stream (`response.created`, `response.output_text.delta`,
// `response.completed`) when the body asks for `stream`. Each answer says which replica made it and
// how many turns its chain has, so a test can tell a conversation that went where its state is.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { readBody, startReplica, type TestReplica } from './replica.js';

export interface ResponsesReplica {
  replica: TestReplica;
  name: string;
  /** Requests it answered 404 to: a follow-up that reached the wrong replica. */
  unknown: string[];
  /** Responses it made, by id: their turn in their chain. */
  responses: Map<string, number>;
  conversations: Set<string>;
  close(): Promise<void>;
}

function notFound(res: ServerResponse, what: string, id: string): void {
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message: `${what} with id '${id}' not found.`, type: 'invalid_request_error', param: null, code: null } }));
}

export async function startResponsesReplica(name: string): Promise<ResponsesReplica> {
  const responses = new Map<string, number>();
  const conversations = new Set<string>();
  const unknown: string[] = [];
  const replica = await startReplica(async (req, res) => {
    const raw = await readBody(req);
    const path = (req.url ?? '').split('?')[0]!;
    if (req.method === 'POST' && path === '/v1/conversations') {
      const id = `conv_${randomBytes(12).toString('hex')}`;
      conversations.add(id);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, object: 'conversation', created_at: 1_700_000_000, metadata: {} }));
      return;
    }
    if (req.method === 'GET' && path.startsWith('/v1/responses/')) {
      const id = decodeURIComponent(path.slice('/v1/responses/'.length));
      if (!responses.has(id)) {
        unknown.push(id);
        notFound(res, 'Response', id);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(responseObject(id, 'completed', `turn ${responses.get(id)} at ${name}`, 'm', undefined)));
      return;
    }
    if (req.method !== 'POST' || path !== '/v1/responses') {
      res.writeHead(404);
      res.end();
      return;
    }
    const body = JSON.parse(raw.toString()) as { model: string; previous_response_id?: string | null; conversation?: string | { id: string } | null; stream?: boolean };
    let turn = 1;
    const previous = body.previous_response_id;
    if (typeof previous === 'string') {
      const before = responses.get(previous);
      if (before === undefined) {
        unknown.push(previous);
        notFound(res, 'Response', previous);
        return;
      }
      turn = before + 1;
    }
    const conversation = typeof body.conversation === 'string' ? body.conversation : (body.conversation?.id ?? undefined);
    if (conversation !== undefined) {
      if (!conversations.has(conversation)) {
        unknown.push(conversation);
        notFound(res, 'Conversation', conversation);
        return;
      }
      turn = 1 + [...responses.keys()].filter((k) => k.startsWith(`resp_${conversation}_`)).length;
    }
    const id = conversation === undefined ? `resp_${randomBytes(12).toString('hex')}` : `resp_${conversation}_${randomBytes(6).toString('hex')}`;
    responses.set(id, turn);
    const text = `turn ${turn} at ${name}`;
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(responseObject(id, 'completed', text, body.model, conversation)));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const event = (type: string, data: Record<string, unknown>, n: number): string => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: n, ...data })}\n\n`;
    res.write(event('response.created', { response: responseObject(id, 'in_progress', '', body.model, conversation) }, 0));
    let n = 1;
    for (const word of text.split(' ')) res.write(event('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: n === 1 ? word : ` ${word}`, logprobs: [] }, n++));
    res.end(event('response.completed', { response: responseObject(id, 'completed', text, body.model, conversation) }, n));
  });
  return { replica, name, unknown, responses, conversations, close: () => replica.close() };
}

/** A Responses API response object (its fields in OpenAI's order: `id` first). */
function responseObject(id: string, status: string, text: string, model: string, conversation: string | undefined): Record<string, unknown> {
  return {
    id,
    object: 'response',
    created_at: 1_700_000_000,
    status,
    model,
    output:
      text === ''
        ? []
        : [{ type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: [] }] }],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    conversation: conversation === undefined ? null : { id: conversation },
    usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
  };
}
