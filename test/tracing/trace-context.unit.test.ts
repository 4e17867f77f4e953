// W3C trace context as Sluice reads and writes it (src/tracing/trace-context.ts): which
// `traceparent` values it continues, their sampled flag, and the ids it makes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatTraceparent, newSpanId, newTraceId, sampledFlag, validTraceparent } from '../../src/tracing/trace-context.js';

const ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

test('valid traceparents: version 00, and a later version with more fields after a dash', () => {
  for (const value of [`00-${ID}-${PARENT}-01`, `00-${ID}-${PARENT}-00`, `cc-${ID}-${PARENT}-09`, `cc-${ID}-${PARENT}-01-what-follows`]) {
    assert.equal(validTraceparent(value), true, value);
  }
});

test('invalid traceparents start a new trace', () => {
  for (const value of [
    '',
    `00-${ID}-${PARENT}-1`,
    `00-${ID.toUpperCase()}-${PARENT}-01`,
    `ff-${ID}-${PARENT}-01`,
    `00-${'0'.repeat(32)}-${PARENT}-01`,
    `00-${ID}-${'0'.repeat(16)}-01`,
    `00-${ID}-${PARENT}-01-more`,
    `00_${ID}-${PARENT}-01`,
    `00-${ID}-${PARENT}-0g`,
    `cc-${ID}-${PARENT}-01x`,
    `00-${ID}-${PARENT}-01, 00-${ID}-${PARENT}-01`,
  ]) {
    assert.equal(validTraceparent(value), false, value);
  }
});

test('the sampled flag is the lowest bit of the flags', () => {
  const flags: [string, boolean][] = [['00', false], ['01', true], ['02', false], ['03', true], ['09', true], ['0a', false], ['ff', true], ['fe', false]];
  for (const [f, sampled] of flags) assert.equal(sampledFlag(`00-${ID}-${PARENT}-${f}`), sampled, f);
});

test('ids are random lowercase hex of the right length, and the header Sluice writes is valid and sampled', () => {
  const traces = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const t = newTraceId();
    const s = newSpanId();
    assert.match(t, /^[0-9a-f]{32}$/);
    assert.match(s, /^[0-9a-f]{16}$/);
    traces.add(t);
    const header = formatTraceparent(t, s);
    assert.equal(validTraceparent(header), true);
    assert.equal(sampledFlag(header), true);
  }
  assert.equal(traces.size, 2000);
});
