// Hostile paths on raw sockets (docs/api.md#the-url): every unsafe `{path}` — raw, percent-encoded
// in either case, mixed — is `400 invalid_path` and no connection is opened to the replica; a
// double-encoded path is forwarded literally (never decoded twice).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TEST_TOKEN, type TestGateway } from '../helpers/gateway.js';
import { type CountingReplica, type CountingSetup, startCountingGateway } from '../helpers/counting-replica.js';
import { assertSluiceError, firstLine, parseResponse, rawExchange } from '../helpers/raw-http.js';

/** `{path}` (and query) values that must be refused, with the rule each one breaks. */
const UNSAFE: [string, string][] = [
  ['/a/./b', 'dot segment'],
  ['/a/../b', 'dot segment'],
  ['/..', 'dot segment'],
  ['/.', 'dot segment'],
  ['/a/..', 'dot segment'],
  ['/a/.', 'dot segment'],
  ['/a/%2e%2e/b', 'dot segment'],
  ['/a/%2E%2E/b', 'dot segment'],
  ['/a/%2e%2E/b', 'dot segment'],
  ['/a/.%2e/b', 'dot segment'],
  ['/a/%2E./b', 'dot segment'],
  ['/a/%2e/b', 'dot segment'],
  ['/%2e%2e', 'dot segment'],
  ['/a/..;x/b', 'dot segment'],
  ['/a/..;/b', 'dot segment'],
  ['/a/.;x/b', 'dot segment'],
  ['/a/%2e%2e;x/b', 'dot segment'],
  ['/a/..%3bx/b', 'dot segment'],
  ['/a/..%3Bx', 'dot segment'],
  ['/a%2fb', 'encoded slash or backslash'],
  ['/a%2Fb', 'encoded slash or backslash'],
  ['/a%5cb', 'encoded slash or backslash'],
  ['/a%5Cb', 'encoded slash or backslash'],
  ['/..%2fetc', 'encoded slash or backslash'],
  ['/a\\b', 'backslash'],
  ['/..\\x', 'backslash'],
  ['//evil.example/x', 'empty first segment (//)'],
  ['//', 'empty first segment (//)'],
  ['/a%00b', 'control character'],
  ['/a%0d%0aX-Injected:%20yes', 'control character'],
  ['/a%0D%0A', 'control character'],
  ['/a%0a', 'control character'],
  ['/a%1f', 'control character'],
  ['/a%1F', 'control character'],
  ['/a%7f', 'control character'],
  ['/a%7F', 'control character'],
  ['/a%09', 'control character'],
  ['/a#frag', 'fragment (#)'],
  ['/a?q=1#frag', 'fragment (#)'],
  ['/a\x7fb', 'control character'],
  ['/a?q=\x7f', 'control character'],
  ['/a?q=1#', 'fragment (#)'],
  ['/a%zz', 'malformed percent-encoding'],
  ['/a%2', 'malformed percent-encoding'],
  ['/a%', 'malformed percent-encoding'],
  ['/caf\xc3\xa9', 'character that must be percent-encoded'],
  ['/a?q=caf\xc3\xa9', 'character that must be percent-encoded'],
];

/** Paths that are safe and forwarded byte for byte, percent-encoding untouched. */
const VERBATIM = [
  '/a/%252e%252e/b', // double-encoded dots: the replica sees `%252e`, never `%2e` or `..`
  '/a/%252f/b',
  '/a/%25%32%65%25%32%65/b', // `%2e%2e` spelled with encoded digits: literal, not decoded twice
  '/a/...',
  '/a/..b',
  '/a/b..',
  '/a/.well-known',
  '/a/;x',
  '/a%3bx',
  '/v1/caf%C3%A9?q=%0d%0a&x=%2F&y=..%2F',
];

describe('hostile paths on raw sockets', () => {
  let replica: CountingReplica;
  let tg: TestGateway;
  let base: string;
  let setup: CountingSetup | undefined;

  before(async () => {
    setup = await startCountingGateway();
    ({ replica, tg, base } = setup);
  });

  after(async () => {
    await setup?.close();
  });

  function raw(target: string, body = '{}'): string {
    return `POST ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_TOKEN}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  }

  test('every unsafe path is 400 invalid_path, and no connection is opened to the replica', async () => {
    for (const [path, rule] of UNSAFE) {
      const exchange = await rawExchange(tg.port, raw(base + path));
      const response = parseResponse(exchange.bytes);
      assertSluiceError(response, 400, 'invalid_path');
      const message = (JSON.parse(response.body.toString()) as { error: { message: string } }).error.message;
      assert.ok(message.includes(rule), `${JSON.stringify(path)}: ${message} (expected: ${rule})`);
      assert.equal(replica.connections(), 0, `${JSON.stringify(path)} opened a connection to the replica`);
    }
    assert.equal(replica.bytes(), 0);
  });

  test('an absolute-form or asterisk-form target is refused by uWS (505) before Sluice sees it; nothing reaches the replica', async () => {
    for (const target of [`http://127.0.0.1:${tg.port}${base}/x`, `http://evil.example${base}/x`, '*', `127.0.0.1:${tg.port}`]) {
      const exchange = await rawExchange(tg.port, raw(target));
      assert.match(firstLine(exchange), /^HTTP\/1\.1 505 /, target);
      assert.ok(exchange.closedByGateway);
    }
    assert.equal(replica.connections(), 0);
  });

  test('`/request` with nothing after it and `/requestX` are 404 not_found', async () => {
    for (const path of [base, `${base}X/y`, `${base}%2fx`]) {
      const exchange = await rawExchange(tg.port, raw(path));
      assertSluiceError(parseResponse(exchange.bytes), 404, 'not_found');
    }
    assert.equal(replica.connections(), 0);
  });

  test('double-encoded and other safe paths are forwarded byte for byte, decoded never', async () => {
    for (const path of VERBATIM) {
      const before = replica.requests.length;
      const exchange = await rawExchange(tg.port, raw(base + path, '{"p":1}'));
      assert.match(firstLine(exchange), /^HTTP\/1\.1 200 /, path);
      assert.equal(replica.requests.length, before + 1);
      const seen = replica.requests.at(-1)!;
      assert.equal(seen.url, path);
      assert.equal(seen.body.toString(), '{"p":1}');
    }
  });
});
