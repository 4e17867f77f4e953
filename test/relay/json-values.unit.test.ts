// A JSON value as the replica reads it (src/relay/body/json-values.ts): each case is the value's JSON
// text, what pydantic makes of it for an `Optional[int]` field (vLLM's `max_tokens`) and for an
// `Optional[bool]` field (`stream`) after Python's `json` parsed the body, or 'refused'. The
// expectations were produced by Python 3.11's `json` and pydantic 2.13.4 (pydantic-core 2.46.4),
// `model_validate` of the parsed value, as vLLM's FastAPI server validates a request.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TopLevelWalk } from '../../src/relay/body/json-top-level.js';
import { boolOf, intOf, stringOf } from '../../src/relay/body/json-values.js';

type Read = number | boolean | null | 'refused';

const PYDANTIC: [string, Read, Read][] = [
  ["900", 900, 'refused'],
  ["900.0", 900, 'refused'],
  ["9e2", 900, 'refused'],
  ["9E2", 900, 'refused'],
  ["9e+2", 900, 'refused'],
  ["900.5", 'refused', 'refused'],
  ["1e400", 'refused', 'refused'],
  ["-1e400", 'refused', 'refused'],
  ["NaN", 'refused', 'refused'],
  ["Infinity", 'refused', 'refused'],
  ["-Infinity", 'refused', 'refused'],
  ["1e-1", 'refused', 'refused'],
  ["0.0", 0, false],
  ["-0", 0, false],
  ["-0.0", 0, false],
  ["1.5e3", 1500, 'refused'],
  ["9.000000000000000001e2", 900, 'refused'],
  ["true", 1, true],
  ["false", 0, false],
  ["null", null, null],
  ["-5", -5, 'refused'],
  ["0", 0, false],
  ["1", 1, true],
  ["2", 2, 'refused'],
  ["1e18", 1e18, 'refused'],
  ["9.3e18", 'refused', 'refused'],
  ["9223372036854775807", 9.223372036854776e18, 'refused'],
  ["99999999999999999999", 1e20, 'refused'],
  ["\"900\"", 900, 'refused'],
  ["\" 900 \"", 900, 'refused'],
  ["\"+900\"", 900, 'refused'],
  ["\"0900\"", 900, 'refused'],
  ["\"900.00\"", 900, 'refused'],
  ["\"900.\"", 'refused', 'refused'],
  ["\"9_00\"", 900, 'refused'],
  ["\"9__00\"", 'refused', 'refused'],
  ["\"_900\"", 'refused', 'refused'],
  ["\"900_\"", 'refused', 'refused'],
  ["\"9e2\"", 'refused', 'refused'],
  ["\"900.5\"", 'refused', 'refused'],
  ["\"-900\"", -900, 'refused'],
  ["\"--900\"", 'refused', 'refused'],
  ["\"+-9\"", 'refused', 'refused'],
  ["\"-+9\"", 'refused', 'refused'],
  ["\"\\u00a0900\"", 900, 'refused'],
  ["\"\\u3000900\\u2028\"", 900, 'refused'],
  ["\"\\ufeff900\"", 'refused', 'refused'],
  ["\"\\u0085900\"", 900, 'refused'],
  ["\"\\t900\\n\"", 900, 'refused'],
  ["\"0x10\"", 'refused', 'refused'],
  ["\"\"", 'refused', 'refused'],
  ["\" \"", 'refused', 'refused'],
  ["\"0\"", 0, false],
  ["\"00\"", 0, 'refused'],
  ["\"0_0\"", 0, 'refused'],
  ["\"0.0\"", 0, 'refused'],
  ["\"00.00\"", 0, 'refused'],
  ["\"-0\"", 0, 'refused'],
  ["\"-00900\"", -900, 'refused'],
  ["\"1_000.0\"", 1000, 'refused'],
  ["\"\u0661\u0662\"", 'refused', 'refused'],
  ["\"true\"", 'refused', true],
  ["\"yes\"", 'refused', true],
  ["\"YES\"", 'refused', true],
  ["\"on\"", 'refused', true],
  ["\"t\"", 'refused', true],
  ["\"y\"", 'refused', true],
  ["\"1\"", 1, true],
  ["\"off\"", 'refused', false],
  ["\"no\"", 'refused', false],
  ["\"n\"", 'refused', false],
  ["\"f\"", 'refused', false],
  ["\"false\"", 'refused', false],
  ["\" true\"", 'refused', 'refused'],
  ["\"maybe\"", 'refused', 'refused'],
  ["\"2\"", 2, 'refused'],
  ["[]", 'refused', 'refused'],
  ["{}", 'refused', 'refused'],
  ["[1]", 'refused', 'refused'],
  ["\"900\\u0000\"", 'refused', 'refused'],
  ["\"9\\u0030\\u0030\"", 900, 'refused'],];

/** The value of `text` as the walk keeps it (a string's bytes between its quotes, undecoded). */
function kept(text: string, keep = 64) {
  const walk = new TopLevelWalk(['v'], [keep]);
  walk.feed(Buffer.from(`{"v":${text}}`));
  assert.equal(walk.outcome, 'closed', text);
  return walk.values[0]!;
}

test('an integer field and a boolean field read each value as pydantic does after Python json', () => {
  for (const [text, asInt, asBool] of PYDANTIC) {
    const int = intOf(kept(text));
    const bool = boolOf(kept(text));
    if (asInt === 'refused') assert.equal(int, undefined, `${text} as an integer`);
    else assert.equal(int, asInt, `${text} as an integer`);
    if (asBool === 'refused') assert.equal(bool, undefined, `${text} as a boolean`);
    else assert.equal(bool, asBool, `${text} as a boolean`);
  }
});

test('a value longer than what was kept cannot be read; a string is decoded', () => {
  assert.equal(intOf(kept(`"${' '.repeat(70)}900"`)), undefined, 'kept in part');
  assert.equal(intOf(kept(`"${' '.repeat(50)}900"`)), 900);
  assert.equal(stringOf(kept('"qw\\u0065n\\"7b"')), 'qwen"7b');
  assert.equal(stringOf(kept('"x"', 0)), undefined, 'kept in part');
  assert.equal(stringOf(kept('7')), undefined, 'not a string');
  assert.equal(stringOf(kept('"bad \\x escape"')), undefined, 'an escape Python refuses');
  const invalidUtf8 = new TopLevelWalk(['v'], [8]);
  invalidUtf8.feed(Buffer.from([0x7b, 0x22, 0x76, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]));
  assert.equal(stringOf(invalidUtf8.values[0]!), undefined, 'not UTF-8');
});
