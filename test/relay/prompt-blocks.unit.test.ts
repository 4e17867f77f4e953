// The prompt's chained block hashes (prefix-aware routing), read from the body walk: the same
// prompt spelled the ways Python's json reads alike hashes alike (spaces, escapes, surrogate
// pairs, pieces, top-level key order), the last of a duplicate key counts, and the model and the
// cache salt seed the chain.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BodyFields } from '../../src/relay/body/body-fields.js';
import { PromptBlocks } from '../../src/relay/body/prompt-blocks.js';

const SYSTEM = 'You are a helpful assistant. '.repeat(20);
const MESSAGES = [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: 'hi é 😀 "quoted" back\\slash' },
];

function blocks(body: string, pieces = 1): string {
  const fields = new BodyFields(new PromptBlocks(64, 16));
  const b = Buffer.from(body);
  const step = Math.ceil(b.length / pieces);
  for (let i = 0; i < b.length; i += step) fields.feed(new Uint8Array(b.subarray(i, i + step)));
  const hashes = fields.promptBlocks();
  return hashes === undefined ? 'none' : Array.from(hashes).join(',');
}

test('one prompt, spelled every way the replica reads alike, gives one chain', () => {
  const plain = JSON.stringify({ model: 'm', messages: MESSAGES });
  const chain = blocks(plain);
  assert.equal(chain.split(',').length, 10, 'whole blocks of 64 bytes only');
  assert.equal(blocks(plain, 7), chain, 'in seven pieces');
  assert.equal(blocks(JSON.stringify({ model: 'm', messages: MESSAGES }, null, 2)), chain, 'pretty-printed');
  assert.equal(blocks(JSON.stringify({ messages: MESSAGES, model: 'm' })), chain, 'top-level keys in another order');
  const escaped = plain.replace('é', '\\u00e9').replace('😀', '\\ud83d\\ude00').replace('helpful', 'help\\u0066ul').replace('"messages"', '"m\\u0065ssages"').replace('\\"quoted\\"', '\\u0022quoted\\u0022').replace('You are', 'You\\u0020are');
  assert.notEqual(escaped, plain);
  assert.equal(blocks(escaped), chain, 'escapes decoded');
  assert.equal(blocks(`{"messages":[1],"model":"m","messages":${JSON.stringify(MESSAGES)}}`), chain, 'the last of a duplicate key');
  assert.notEqual(blocks(`{"messages":${JSON.stringify(MESSAGES)},"model":"m","messages":[1]}`), chain, 'not the first');
});

test('the model and the cache salt seed the chain; a prompt shorter than a block has none', () => {
  const chain = blocks(JSON.stringify({ model: 'm', messages: MESSAGES }));
  assert.notEqual(blocks(JSON.stringify({ model: 'm2', messages: MESSAGES })), chain);
  assert.notEqual(blocks(JSON.stringify({ model: 'm', cache_salt: 's', messages: MESSAGES })), chain);
  const other = blocks(JSON.stringify({ model: 'm', messages: [MESSAGES[0], { role: 'user', content: 'something else entirely' }] })).split(',');
  const mine = chain.split(',');
  let k = 0;
  while (k < other.length && other[k] === mine[k]) k++;
  assert.equal(k, 9, 'the blocks of the shared system prompt match, the rest differ');
  assert.equal(blocks('{"model":"m","prompt":"short"}'), 'none');
  assert.equal(blocks('not json'), 'none');
  assert.equal(blocks('{"model":"m"}'), 'none');
});
