// The stored state a request names and the ids an answer gives (docs/api.md#stored-state-across-replicas),
// read as the replica and the SDKs read them: a body's `previous_response_id` / `conversation`
// (src/relay/body/body-fields.ts, state-ref.ts) and an answer's `id` / `conversation`, JSON or an
// event stream (src/relay/answer/answer-state-ids.ts), in pieces cut at every byte.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AnswerStateIds } from '../../src/relay/answer/answer-state-ids.js';
import { BodyFields } from '../../src/relay/body/body-fields.js';
import { isStatePath, pathStateId } from '../../src/relay/body/state-ref.js';
import type { Replica, ReplicaSet } from '../../src/relay/replica-set.js';

/** Every way to cut `text` in two, and in single bytes. */
function cuts(text: string): Buffer[][] {
  const b = Buffer.from(text);
  const out: Buffer[][] = [[b], Array.from(b, (_, i) => b.subarray(i, i + 1))];
  for (let i = 1; i < b.length; i++) out.push([b.subarray(0, i), b.subarray(i)]);
  return out;
}

function stateIdOf(text: string): string | undefined {
  const seen = new Set<string | undefined>();
  for (const pieces of cuts(text)) {
    const fields = new BodyFields();
    for (const p of pieces) fields.feed(p);
    seen.add(fields.stateId());
  }
  assert.equal(seen.size, 1, `one reading of ${text} however it is cut: ${[...seen].join(', ')}`);
  return [...seen][0];
}

test('a body names its state as Python reads it: previous_response_id, else conversation (a string or an object with an id)', () => {
  const cases: [string, string | undefined][] = [
    ['{"model":"m","previous_response_id":"resp_1"}', 'resp_1'],
    ['{"previous_r\\u0065sponse_id":"resp_\\u0032"}', 'resp_2'],
    ['{"previous_response_id":"resp_a","previous_response_id":"resp_b"}', 'resp_b'],
    ['{"previous_response_id":null,"conversation":"conv_1"}', 'conv_1'],
    ['{"conversation":{"id":"conv_2","x":[1,"}"]}}', 'conv_2'],
    ['{"conversation":{"id":"conv_x","id":"conv_\\u0033"}}', 'conv_3'],
    ['{"conversation":{"metadata":{}}}', undefined],
    ['{"conversation":{"id":5}}', undefined],
    ['{"conversation":{"id":"c","n":NaN}}', undefined], // Python reads it; JSON.parse does not: picked as usual
    ['{"previous_response_id":5}', undefined],
    ['{"previous_response_id":""}', undefined],
    [`{"previous_response_id":"${'r'.repeat(257)}"}`, undefined],
    ['{"input":[{"previous_response_id":"resp_nested"}]}', undefined],
    ['{"model":"m"}', undefined],
  ];
  for (const [text, want] of cases) assert.equal(stateIdOf(text), want, text);
});

test('paths: the Responses and Conversations APIs, and an id in the path', () => {
  assert.ok(isStatePath('/v1/responses'));
  assert.ok(isStatePath('/v1/responses/resp_1/input_items'));
  assert.ok(isStatePath('/v1/conversations'));
  assert.ok(!isStatePath('/v1/responsesx'));
  assert.ok(!isStatePath('/v1/chat/completions'));
  assert.equal(pathStateId('/v1/responses/resp_1'), 'resp_1');
  assert.equal(pathStateId('/v1/responses/resp%5F1/cancel'), 'resp_1');
  assert.equal(pathStateId('/v1/conversations/conv_1/items'), 'conv_1');
  assert.equal(pathStateId('/v1/responses/%E0'), undefined);
  assert.equal(pathStateId('/v1/responses/'), undefined);
  assert.equal(pathStateId('/v1/responses'), undefined);
});

/** The ids an answer teaches, fed in `pieces`. */
function learned(stream: boolean, pieces: Buffer[]): string[] {
  const ids: string[] = [];
  const set = { learnState: (_r: Replica, id: string) => ids.push(id) } as unknown as ReplicaSet;
  const scanner = new AnswerStateIds(stream, set, {} as Replica);
  for (const p of pieces) scanner.scan(p);
  return ids;
}

function learnedEveryCut(stream: boolean, text: string): string[] {
  const all = cuts(text).map((pieces) => learned(stream, pieces).join(' '));
  assert.equal(new Set(all).size, 1, `one reading however ${JSON.stringify(text.slice(0, 40))} is cut: ${[...new Set(all)].join(' | ')}`);
  return all[0] === '' ? [] : all[0]!.split(' ');
}

test('an answer teaches its ids: a JSON response or conversation, and the first response event of a stream', () => {
  assert.deepEqual(learnedEveryCut(false, '{"id":"resp_1","object":"response","output":[{"id":"msg_1"}],"conversation":{"id":"conv_1"}}'), ['resp_1', 'conv_1']);
  assert.deepEqual(learnedEveryCut(false, '{"object":"conversation","id":"conv_\\u0039"}'), ['conv_9']);
  assert.deepEqual(learnedEveryCut(false, '{"object":"list","data":[{"id":"resp_x"}]}'), []);
  const event = (type: string, response: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, response })}\n\n`;
  const stream = `: comment\n${event('response.created', { id: 'resp_s', conversation: { id: 'conv_s' }, output: [] })}data: {"type":"response.output_text.delta","delta":"x"}\n\n${event('response.completed', { id: 'resp_s' })}`;
  assert.deepEqual(learnedEveryCut(true, stream), ['resp_s', 'conv_s'], 'the first event that names an id, once');
  assert.deepEqual(learnedEveryCut(true, stream.replace(/\n/g, '\r\n')), ['resp_s', 'conv_s'], 'CRLF line ends');
  assert.deepEqual(learnedEveryCut(true, 'data:{"response":{"id":"resp_nospace"}}\n'), ['resp_nospace']);
  assert.deepEqual(learnedEveryCut(true, 'xdata: {"response":{"id":"resp_no"}}\ndata: {"delta":"data: {\\"response\\":{\\"id\\":\\"resp_in_text\\"}}"}\n'), []);
  // Only the first 64 KiB are looked at.
  const late = `data: {"delta":"${'x'.repeat(70 * 1024)}"}\n${event('response.created', { id: 'resp_late' })}`;
  assert.deepEqual(learned(true, [Buffer.from(late)]), []);
});
