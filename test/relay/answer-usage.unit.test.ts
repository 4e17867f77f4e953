// The usage finder (src/relay/answer/answer-usage.ts) on its own: a JSON answer's and a stream's usage
// however the bytes are cut into reads (every cut, one byte at a time), the last usage of a stream
// winning, `usage: null`, `"usage"` inside strings and nested objects, counts cut by the tail's
// bound, the JSON size bound, and which answers are looked at.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerUsage, isJson } from '../../src/relay/answer/answer-usage.js';
import { USAGE_JSON_MAX_BYTES, USAGE_TAIL_BYTES } from '../../src/tunables.js';

function usageOf(stream: boolean, pieces: string[]): [number, number] | undefined {
  const usage = answerUsage(stream, stream ? 'text/event-stream' : 'application/json', -1, false)!;
  for (const piece of pieces) usage.scan(Buffer.from(piece));
  usage.end();
  return usage.reported ? [usage.promptTokens, usage.completionTokens] : undefined;
}

/** The usage of `text` whole, cut in two at every place, and one byte at a time: all must agree. */
function everyCut(stream: boolean, text: string): [number, number] | undefined {
  const whole = usageOf(stream, [text]);
  for (let cut = 1; cut < text.length; cut++) assert.deepEqual(usageOf(stream, [text.slice(0, cut), text.slice(cut)]), whole, `cut at ${cut}`);
  assert.deepEqual(usageOf(stream, [...text]), whole, 'byte by byte');
  return whole;
}

test('a JSON answer: usage at the top level, pretty-printed or not, with details nested', () => {
  const body = JSON.stringify({
    id: 'x',
    choices: [{ message: { role: 'assistant', content: 'hi' } }],
    usage: { prompt_tokens: 12, total_tokens: 47, completion_tokens: 35, prompt_tokens_details: { cached_tokens: 4, completion_tokens: 999 } },
  });
  assert.deepEqual(everyCut(false, body), [12, 35]);
  assert.deepEqual(everyCut(false, JSON.stringify(JSON.parse(body), null, 2)), [12, 35]);
  assert.deepEqual(everyCut(false, '{"usage" :\r\n {"completion_tokens": 7}}'), [0, 7]);
});

test('a stream: the last event with a usage wins, `usage: null` is none, [DONE] after it changes nothing', () => {
  const events = [
    'data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\n\n',
    'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n',
    'data: {"choices":[{"delta":{"content":"b"}}],"usage":null}\n\n',
    'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}\r\n\r\n',
    'data: [DONE]\n\n',
  ];
  assert.deepEqual(everyCut(true, events.join('')), [5, 9]);
  assert.equal(everyCut(true, events[0]! + events[2]! + events[4]!), undefined);
});

test('"usage" inside strings is never the key: escaped quotes, a value named usage, tool arguments', () => {
  const tricky = [
    JSON.stringify({ choices: [{ message: { content: 'the "usage": {"prompt_tokens": 999, "completion_tokens": 999} of it' } }] }),
    JSON.stringify({ note: 'usage', tool: { arguments: '{"usage":{"prompt_tokens":1,"completion_tokens":2}}' } }),
    '{"kind":"usage","n":1}',
  ];
  for (const body of tricky) {
    assert.equal(everyCut(false, body), undefined, body);
    assert.equal(everyCut(true, `data: ${body}\n\n`), undefined, body);
  }
});

test('counts that are not plain integers, or cut by the bound, are not taken', () => {
  assert.equal(everyCut(false, '{"usage":{"prompt_tokens":"12","completion_tokens":-1}}'), undefined);
  assert.equal(everyCut(false, '{"usage":{"prompt_tokens":1.5}}'), undefined);
  assert.equal(everyCut(false, '{"usage":"none"}'), undefined);
  // The prompt count ends inside the tail; the completion count would end past it.
  const pad = ' '.repeat(USAGE_TAIL_BYTES - 30);
  assert.deepEqual(usageOf(false, [`{"usage":{"prompt_tokens":4,${pad}"completion_tokens":123456}}`]), [4, 0]);
  // A stream's usage ends with its line: what follows on the next line is not read.
  assert.equal(everyCut(true, 'data: {"usage":\ndata: {"prompt_tokens":1}}\n\n'), undefined);
});

test('a JSON answer past the bound counts nothing; which answers are looked at', () => {
  const usage = answerUsage(false, 'application/json', -1, false)!;
  usage.scan(Buffer.from('{"usage":{"prompt_tokens":1,"completion_tokens":2},"pad":"'));
  usage.scan(Buffer.alloc(USAGE_JSON_MAX_BYTES, 0x61));
  usage.scan(Buffer.from('"}'));
  usage.end();
  assert.equal(usage.reported, false);
  assert.equal(answerUsage(false, 'application/json', USAGE_JSON_MAX_BYTES + 1, false), undefined);
  assert.notEqual(answerUsage(false, 'application/json', USAGE_JSON_MAX_BYTES, false), undefined);
  assert.equal(answerUsage(false, 'text/plain', 10, false), undefined);
  assert.equal(answerUsage(true, 'text/event-stream', -1, true), undefined);
  for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/problem+json']) assert.equal(isJson(type), true, type);
  for (const type of [undefined, 'text/json', 'application/jsonl', 'application/x-ndjson', 'text/event-stream']) assert.equal(isJson(type), false, String(type));
});

test('the search: near misses around the key, the key at the first and the last bytes of a read', () => {
  const misses = '"usag":0,"usagee":1,"susage":2,"usage_":3,"u\\"usage\\"":4,';
  assert.deepEqual(everyCut(true, `data: {${misses}"usage":{"prompt_tokens":2,"completion_tokens":3}}\n\n`), [2, 3]);
  assert.deepEqual(everyCut(false, `{${misses}"usage":{"prompt_tokens":2,"completion_tokens":3}}`), [2, 3]);
  assert.deepEqual(usageOf(false, ['"usage"', ':{"prompt_tokens":5}']), [5, 0]);
  assert.deepEqual(usageOf(false, ['{"a":1,"usage"', ':{"completion_tokens":6}}']), [0, 6]);
});

test('a value "usage" before the key, or "usage": null before it, does not hide the usage that follows', () => {
  const usage = '"usage":{"prompt_tokens":3,"completion_tokens":4}';
  assert.deepEqual(everyCut(false, `{"object":"usage",${usage}}`), [3, 4]);
  assert.deepEqual(everyCut(true, `data: {"object":"usage",${usage}}\n\n`), [3, 4]);
  assert.equal(everyCut(false, '{"usage": null, "n": 1}'), undefined);
  assert.deepEqual(everyCut(true, `data: {"x":{"usage":null},${usage}}\n\n`), [3, 4]);
});
