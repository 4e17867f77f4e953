// Config tests' helpers: the problems a config is rejected with.
import assert from 'node:assert/strict';
import { ConfigError, type ConfigProblem, parseConfig } from '../../src/config/load.js';

/** The problems `raw` is rejected with (fails the test if it is accepted). */
export function problemsOf(raw: unknown): ConfigProblem[] {
  try {
    parseConfig(raw);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    return err.problems;
  }
  assert.fail('expected the config to be rejected');
}
