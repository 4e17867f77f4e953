// The fields Sluice reads out of a request's body (src/relay/body/body-fields.ts): a router's model and a
// tokensPerMinute reservation read as the replica reads them, decided from the body's first part
// and checked against every later value as the rest streams on, in pieces cut anywhere. Prints
// the walk's cost per KiB of body on this machine (docs/api.md#reading-a-body quotes it); asserts
// no duration.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BodyFields, NoModel } from '../../src/relay/body/body-fields.js';

/** A reader fed `text` in pieces cut at `cuts`; each feed's answer. */
function fed(text: string, cuts: number[] = []): { fields: BodyFields; accepted: boolean[] } {
  const body = Buffer.from(text);
  const ends = [...cuts, body.length];
  const fields = new BodyFields();
  const accepted = ends.map((end, i) => fields.feed(body.subarray(i === 0 ? 0 : ends[i - 1]!, end)));
  return { fields, accepted };
}

function modelOf(text: string, complete = true): string {
  const m = fed(text).fields.model(complete);
  return m instanceof NoModel ? `400: ${m.message}` : m;
}

test('the model: the top-level "model" as Python reads it; two different values, no string, not JSON: 400', () => {
  const cases: [string, string | RegExp][] = [
    ['{"model":"llama"}', 'llama'],
    [' \n{ "messages": [{"model":"nested"}], "model" : "qwen\\u0031" }', 'qwen1'],
    ['{"m\\u006fdel":"escaped-key"}', 'escaped-key'],
    ['{"model":"a","model":"a"}', 'a'],
    ['{"model":"a","m\\u006fdel":"\\u0061"}', 'a'],
    ['{"tools":{"model":"x"},"n":-1.5e3,"ok":true,"z":null,"t":NaN,"model":"c"}', 'c'],
    ['{"model":"a","model":"b"}', /given twice/],
    ['{"model":"a","m\\u006fdel":"b"}', /given twice/],
    ['{"model":7,"model":"a"}', /given twice/],
    ['{"messages":[]}', /no "model"/],
    ['{"model":7}', /not a string/],
    ['{"model":null}', /not a string/],
    ['[{"model":"a"}]', /not a JSON object/],
    ['"model"', /not a JSON object/],
    ['{"model":"a"', /not valid JSON/],
    ['', /not valid JSON/],
    ['x{"model":"a"}', /not valid JSON/],
    ['{"model":"bad \\x escape"}', /not valid JSON/],
    [`{"model":"${'m'.repeat(5000)}"}`, /longer than any model name/],
  ];
  for (const [text, want] of cases) {
    if (typeof want === 'string') assert.equal(modelOf(text), want, text);
    else assert.match(modelOf(text), want, text);
  }
  const marked = new BodyFields();
  marked.feed(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"after a mark"}')]));
  assert.equal(marked.model(true), 'after a mark', 'a UTF-8 byte order mark is skipped, as Python does');
  const utf16 = new BodyFields();
  utf16.feed(Buffer.from('{"model":"a"}', 'utf16le'));
  assert.match((utf16.model(true) as NoModel).message, /not UTF-8/);
});

test('the model of a body still arriving: the last whole one; a later "model" with another value is refused', () => {
  const body = '{"messages":[{"role":"user","content":"a \\"quoted\\" {brace"}],"model":"qw\\"en","stream":true,"prompt":"';
  for (let cut = 1; cut < body.length; cut += 7) assert.equal(fed(body, [cut]).fields.model(false), 'qw"en', `cut at ${cut}`);
  assert.ok(fed('{"prompt":"xxxxxxxx').fields.model(false) instanceof NoModel, 'not yet named: none');
  assert.ok(fed('{"model":12,').fields.model(false) instanceof NoModel, 'not a string');
  // Routed by the first part; the rest streams on.
  const rest = (later: string): { accepted: boolean[]; refused: string | undefined } => {
    const fields = new BodyFields();
    fields.feed(Buffer.from('{"model":"cheap","prompt":"'));
    assert.equal(fields.model(false), 'cheap');
    const accepted = [fields.feed(Buffer.from('xxxx",')), fields.feed(Buffer.from(later)), fields.feed(Buffer.from('}'))];
    return { accepted, refused: fields.refused };
  };
  assert.deepEqual(rest('"model":"cheap"'), { accepted: [true, true, true], refused: undefined });
  assert.deepEqual(rest('"n":{"model":"nested"}'), { accepted: [true, true, true], refused: undefined });
  const again = rest('"mod\\u0065l":"expensive"');
  assert.deepEqual(again.accepted, [true, false, false]);
  assert.match(again.refused!, /"model" again/);
  // A model value open where the first part ends: routed by the earlier one, the open one checked when it ends.
  const open = new BodyFields();
  open.feed(Buffer.from('{"model":"cheap","model":"che'));
  assert.equal(open.model(false), 'cheap');
  assert.equal(open.feed(Buffer.from('ap"')), true);
  const other = new BodyFields();
  other.feed(Buffer.from('{"model":"cheap","model":"exp'));
  assert.equal(other.model(false), 'cheap');
  assert.equal(other.feed(Buffer.from('ensive"}')), false);
});

test('the reservation: the larger of max_tokens and max_completion_tokens as pydantic reads them, at most the limit', () => {
  const cases: [string, number | RegExp][] = [
    ['{}', 0],
    ['[1,2]', 0],
    ['not json', 0],
    ['{"max_tokens":900}', 900],
    ['{"max_tokens":"900"}', 900],
    ['{"max_tokens":" 0900 "}', 900],
    ['{"max_tokens":9e2}', 900],
    ['{"max_tokens":900.0}', 900],
    ['{"max_tokens":true}', 1],
    ['{"max_tokens":null}', 0],
    ['{"max_tokens":-5}', 0],
    ['{"max_tokens":1,"max_tokens":900}', 900],
    ['{"max_tokens":900,"max_tokens":1}', 1],
    ['{"metadata":{"max_tokens":5},"max_tokens":900}', 900],
    ['{"metadata":{"max_tokens":900}}', 0],
    ['{"max\\u005ftokens":900}', 900],
    ['{"max_completion_tokens":0,"max_tokens":900}', 900],
    ['{"max_completion_tokens":700,"max_tokens":20}', 700],
    ['{"max_tokens":1e9}', 1000],
    ['{"max_tokens":99999999999999999999999}', 1000],
    ['{"max_tokens":900.5}', /"max_tokens" is not an integer/],
    ['{"max_tokens":"9e2"}', /"max_tokens" is not an integer/],
    ['{"max_tokens":NaN}', /"max_tokens" is not an integer/],
    ['{"max_completion_tokens":[1]}', /"max_completion_tokens" is not an integer/],
    [`{"max_tokens":"${' '.repeat(100)}9"}`, /is too long to read/],
  ];
  for (const [text, want] of cases) {
    for (const cut of [[], [Math.floor(text.length / 2)]]) {
      const got = fed(text, cut).fields.reservation(1000);
      if (typeof want === 'number') assert.equal(got, want, text);
      else assert.match(String(got), want, text);
    }
  }
  const utf32 = new BodyFields();
  utf32.feed(Buffer.from([0, 0, 0, 0x7b]));
  assert.match(String(utf32.reservation(1000)), /UTF-8/);
});

test('after the reservation: a later value asking for more, or no integer, is refused; one asking for no more is not', () => {
  const later = (first: string, rest: string): string | undefined => {
    const fields = new BodyFields();
    fields.feed(Buffer.from(first));
    assert.equal(typeof fields.reservation(1000), 'number');
    fields.feed(Buffer.from(rest));
    return fields.refused;
  };
  assert.equal(later('{"max_tokens":500,"p":"', 'x","max_tokens":400}'), undefined);
  assert.equal(later('{"max_tokens":500,"p":"', 'x","max_tokens":"500","max_completion_tokens":2}'), undefined);
  assert.match(later('{"max_tokens":500,"p":"', 'x","max_tokens":501}')!, /more tokens/);
  assert.match(later('{"p":"', 'x","max_tokens":1}')!, /more tokens/);
  assert.match(later('{"p":"', 'x","max_completion_tokens":"x"}')!, /not an integer/);
  // At the limit already: a later value can ask for no more than the limit.
  assert.equal(later('{"max_tokens":5000,"p":"', 'x","max_tokens":9000}'), undefined);
  // Open where the first part ended: checked once it ends.
  assert.equal(later('{"max_tokens":500,"max_tokens":5', '0}'), undefined);
  assert.match(later('{"max_tokens":500,"max_tokens":5', '01}')!, /more tokens/);
});

test('the cost of the walk per KiB: a chat body, a long conversation, a 1 MiB prompt (printed)', () => {
  const line = 'Explain, step by step, why the sky looks "blue" at noon.\n';
  const chat = Buffer.from(JSON.stringify({ model: 'llama-3.1-8b', messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: line.repeat(15) }], max_tokens: 256, stream: true }));
  const turns = Array.from({ length: 120 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: line.repeat(9) }));
  const conversation = Buffer.from(JSON.stringify({ model: 'llama-3.1-8b', messages: turns, max_completion_tokens: 512, temperature: 0.2 }));
  const mib = Buffer.from(JSON.stringify({ model: 'llama-3.1-8b', prompt: 'p'.repeat(1024 * 1024 - 60), max_tokens: 16 }));
  const time = (body: Buffer): number => {
    const read = (): void => {
      const fields = new BodyFields();
      fields.feed(body);
      fields.model(true);
      fields.reservation(1000);
    };
    const n = Math.max(20, Math.floor(20_000_000 / body.length));
    for (let i = 0; i < n / 4; i++) read();
    const start = performance.now();
    for (let i = 0; i < n; i++) read();
    return ((performance.now() - start) / n) * 1000;
  };
  const shown = (name: string, body: Buffer): string => {
    const us = time(body);
    return `${name} (${(body.length / 1024).toFixed(1)} KiB) ${us.toFixed(2)} µs, ${((us / body.length) * 1024).toFixed(3)} µs per KiB`;
  };
  assert.equal(fed(chat.toString()).fields.model(true), 'llama-3.1-8b');
  assert.equal(fed(conversation.toString()).fields.reservation(1000), 512);
  console.log(`# body-fields cost: ${shown('a chat body', chat)}; ${shown('a conversation of 120 turns', conversation)}; ${shown('a 1 MiB prompt', mib)}`);
});
