// The LLM token usage region of the counter stores (src/metrics/token-usage.ts): a token keeps its
// place when its table is built again (a reload), names are per service, two stores (threads) sum
// by name, non-ASCII names round-trip, and a token past the places or the name length counts
// under OTHER_TOKEN.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CounterLayout, RequestCounters, sumCounters } from '../../src/metrics/request-counters.js';
import { OTHER_TOKEN, TOKEN_NAME_BYTES, TOKEN_SLOTS } from '../../src/metrics/token-usage.js';

function usage(layout: CounterLayout, stores: RequestCounters[], slug: string): Record<string, [number, number]> {
  const service = sumCounters(layout, stores).services.find((s) => s.slug === slug)!;
  return Object.fromEntries(service.llmTokens);
}

test('places by name per service, kept across rebuilds, summed over stores by name', () => {
  const layout = new CounterLayout(['a', 'b']);
  const one = new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength));
  const two = new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength));
  const ci = one.tokens.place(0, 'ci');
  const caf = one.tokens.place(0, 'café ☃');
  assert.equal(one.tokens.place(0, 'ci'), ci, 'the same place when the table is built again');
  assert.notEqual(one.tokens.place(1, 'ci'), ci, "another service's token of the same name has its own");
  // A name of exactly TOKEN_NAME_BYTES bytes (two-byte characters) has a place of its own.
  const longest = 'é'.repeat(TOKEN_NAME_BYTES / 2);
  one.tokens.add(one.tokens.place(1, longest), 7, 0);
  one.tokens.add(ci, 10, 3);
  one.tokens.add(caf, 1, 1);
  one.tokens.add(-1, 99, 99); // a token without a place: nothing
  // The other thread met the tokens in another order.
  two.tokens.place(0, 'café ☃');
  two.tokens.add(two.tokens.place(0, 'ci'), 5, 2);
  assert.deepEqual(usage(layout, [one, two], 'a'), { ci: [15, 5], 'café ☃': [1, 1] });
  assert.deepEqual(usage(layout, [one, two], 'b'), { ci: [0, 0], [longest]: [7, 0] });
});

test(`past ${TOKEN_SLOTS} names, or a name over ${TOKEN_NAME_BYTES} bytes, the usage counts under ${OTHER_TOKEN}`, () => {
  const layout = new CounterLayout(['a']);
  const store = new RequestCounters(layout);
  for (let i = 0; i < TOKEN_SLOTS; i++) store.tokens.add(store.tokens.place(0, `t${i}`), 1, 0);
  const late = store.tokens.place(0, 'late');
  const long = store.tokens.place(0, 'x'.repeat(TOKEN_NAME_BYTES + 1));
  assert.equal(late, long);
  store.tokens.add(late, 2, 3);
  store.tokens.add(long, 1, 1);
  const counted = usage(layout, [store], 'a');
  assert.equal(Object.keys(counted).length, TOKEN_SLOTS + 1);
  assert.deepEqual(counted[OTHER_TOKEN], [3, 4]);
  assert.deepEqual(counted['t7'], [1, 0]);
});

test("routers' tokens: a block per router slug after the services', taken by slug in each store, summed by slug; none left: counted nowhere", () => {
  const layout = new CounterLayout(['a'], 2);
  const one = new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength));
  const two = new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength));
  const models = one.tokens.routerBlock('models');
  assert.equal(one.tokens.routerBlock('models'), models, 'the same block when the router is built again');
  assert.notEqual(models, 0, "not the service's block");
  one.tokens.add(one.tokens.place(models, 'team'), 10, 50);
  // The service's token of the same name is another place.
  one.tokens.add(one.tokens.place(0, 'team'), 1, 1);
  const other = one.tokens.routerBlock('other');
  one.tokens.place(other, 'x');
  assert.equal(one.tokens.routerBlock('third'), -1, 'both router blocks taken');
  assert.equal(one.tokens.place(-1, 'team'), -1);
  one.tokens.add(-1, 5, 5);
  // The other thread met the routers in another order.
  two.tokens.routerBlock('other');
  two.tokens.add(two.tokens.place(two.tokens.routerBlock('models'), 'team'), 1, 2);
  const totals = sumCounters(layout, [one, two]);
  assert.deepEqual(Object.fromEntries(totals.routers.get('models')!), { team: [11, 52] });
  assert.deepEqual(Object.fromEntries(totals.routers.get('other')!), { x: [0, 0] });
  assert.equal(totals.routers.has('third'), false);
  assert.deepEqual(usage(layout, [one, two], 'a'), { team: [1, 1] });
});
