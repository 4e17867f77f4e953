// The model a router's request names (src/relay/body-model.ts): JSON.parse for a complete body
// within 1 MiB, the prefix walk for a longer or unfinished one; both agree on what they both see.
// Prints the cost of each on this machine (docs/api.md#routers quotes it); asserts no duration.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bodyModel, NoModel, walkForModel } from '../../src/relay/body-model.js';

const pieces = (text: string, at: number[] = []): Buffer[] => {
  const b = Buffer.from(text);
  const cuts = [0, ...at, b.length];
  return cuts.slice(1).map((end, i) => b.subarray(cuts[i]!, end));
};

test('the top-level "model" of a complete body, whatever comes before or inside it', () => {
  const cases: [string, string | 'no'][] = [
    ['{"model":"llama"}', 'llama'],
    [' \n{ "messages": [{"model":"nested"}], "model" : "qwen\\u0031" }', 'qwen1'],
    ['{"model":"a","model":"b"}', 'b'],
    ['{"tools":{"model":"x"},"n":-1.5e3,"ok":true,"z":null,"model":"c"}', 'c'],
    ['{"messages":[]}', 'no'],
    ['{"model":7}', 'no'],
    ['{"model":null}', 'no'],
    ['[{"model":"a"}]', 'no'],
    ['"model"', 'no'],
    ['{"model":"a"', 'no'],
    ['', 'no'],
    ['{"mode\\u006c":"a"}', 'a'],
  ];
  for (const [body, want] of cases) {
    const got = bodyModel(pieces(body, body.length > 4 ? [3] : []), true);
    if (want === 'no') assert.ok(got instanceof NoModel, `${body}: ${String(got)}`);
    else assert.equal(got, want, body);
  }
});

test('the walk over a prefix: pieces cut anywhere, the model early or never', () => {
  const body = '{"messages":[{"role":"user","content":"a \\"quoted\\" {brace"}],"model":"qw\\"en","stream":true,"prompt":"';
  for (let cut = 1; cut < body.length; cut += 7) assert.equal(walkForModel(pieces(body, [cut])), 'qw"en', `cut at ${cut}`);
  assert.ok(walkForModel(pieces('{"prompt":"xxxxxxxx')) instanceof NoModel, 'not yet named: none');
  assert.ok(walkForModel(pieces('{"model":12,')) instanceof NoModel, 'not a string');
  assert.ok(walkForModel(pieces('x{"model":"a"}')) instanceof NoModel, 'not JSON');
  assert.ok(walkForModel(pieces(`{"model":"${'m'.repeat(5000)}"}`)) instanceof NoModel, 'a name longer than any model');
  // Past the first MiB nothing counts.
  const late = `{"prompt":"${'p'.repeat(1024 * 1024)}","model":"late"}`;
  assert.ok(walkForModel(pieces(late, [500_000])) instanceof NoModel);
  assert.ok(bodyModel(pieces(late), true) instanceof NoModel, 'a complete body over 1 MiB is walked too');
});

test('the cost: JSON.parse of a chat body and of a 1 MiB one, the walk of 1 MiB (printed)', () => {
  const chat = JSON.stringify({ model: 'llama-3.1-8b', messages: [{ role: 'system', content: 's'.repeat(200) }, { role: 'user', content: 'u'.repeat(700) }], stream: true });
  const mib = JSON.stringify({ model: 'llama-3.1-8b', prompt: 'p'.repeat(1024 * 1024 - 60) });
  const time = (n: number, f: () => unknown): number => {
    const start = performance.now();
    for (let i = 0; i < n; i++) f();
    return ((performance.now() - start) / n) * 1000;
  };
  const small = [Buffer.from(chat)];
  const big = [Buffer.from(mib)];
  const bigOpen = [Buffer.from(mib + '"more')];
  time(2000, () => bodyModel(small, true));
  const chatUs = time(20_000, () => bodyModel(small, true));
  const mibUs = time(20, () => bodyModel(big, true));
  const walkUs = time(20, () => walkForModel(bigOpen));
  assert.equal(bodyModel(small, true), 'llama-3.1-8b');
  console.log(`# body-model cost: JSON.parse ${chat.length} B ${chatUs.toFixed(1)} µs; JSON.parse ${mib.length} B ${(mibUs / 1000).toFixed(2)} ms; walk of 1 MiB ${(walkUs / 1000).toFixed(2)} ms`);
});

test('the walk and JSON.parse agree on a malformed body: a value that starts as no JSON value does, a literal followed by ]', () => {
  for (const body of ['{"model":"a","x":1]}', '{"x":1],"model":"a"}', '{"model":"a","x":@}']) {
    assert.ok(bodyModel(pieces(body), true) instanceof NoModel, `${body}: parsed`);
    assert.ok(walkForModel(pieces(body)) instanceof NoModel, `${body}: walked`);
  }
});
