// The whole header policy, as tables over the pure modules (no sockets):
// - read: what Sluice reads from the caller's headers (src/relay/request/headers.ts): framing, the
//   malformed ones, X-Sluice-Priority, X-Sluice-Max-Wait-Ms, the affinity header;
// - forward: what the replica receives (src/relay/replica-request-head.ts,
//   docs/api.md#what-the-replica-receives): the allowlist, `forwardHeaders`, the framing;
// - return: what the caller gets of the replica's head (src/relay/answer/response-headers.ts,
//   docs/api.md#what-the-caller-receives), from the bytes the replica sends through the upstream
//   parser (src/http/response-parser.ts), fed whole and byte by byte.
// The socket tests (relay-headers, relay-framing, hostile-framing) check the same on the wire.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HttpRequest } from 'uWebSockets.js';
import { type CallerHeaders, headerProblem, readCallerHeaders, requestFraming, requestMaxWait, requestPriority } from '../../src/relay/request/headers.js';
import { requestHead } from '../../src/relay/replica-request-head.js';
import { bodylessAnswer, returnField, type ReturnedFields, writeReturnedHead } from '../../src/relay/answer/response-headers.js';
import { PARSE_DONE, PARSE_ERROR, ResponseParser } from '../../src/http/response-parser.js';

type Fields = readonly (readonly [string, string])[];

/** The caller's request as uWS hands it over: `forEach` over the fields, names in lower case. */
function callerRequest(fields: Fields): HttpRequest {
  return {
    forEach(visit: (name: string, value: string) => void): void {
      for (const [name, value] of fields) visit(name, value);
    },
  } as unknown as HttpRequest;
}

function read(fields: Fields, forward: readonly string[] = [], affinity = ''): CallerHeaders {
  return readCallerHeaders(callerRequest(fields), new Set(forward), affinity);
}

// ── read: what Sluice reads from the caller ─────────────────────────────────────────────────

const TOKEN_PRIORITY = 5;
const MIN_PRIORITY = -10;
const MAX_WAIT_MS = 1_000;

interface Reading {
  /** requestFraming: body bytes, -1 chunked, or the refusal. */
  framing: number | string;
  /** headerProblem: why the head is malformed beyond its framing. */
  problem: string | undefined;
  priority: number | string;
  maxWait: number | string;
  affinity: string | undefined;
}

const READ_DEFAULT: Reading = { framing: 0, problem: undefined, priority: TOKEN_PRIORITY, maxWait: -1, affinity: undefined };

const READ: readonly { what: string; fields: Fields; forward?: string[]; affinity?: string; reads: Partial<Reading> }[] = [
  { what: 'no headers: no body, the token priority, the service wait', fields: [], reads: {} },
  { what: 'Content-Length', fields: [['content-length', '7']], reads: { framing: 7 } },
  { what: 'Content-Length 0', fields: [['content-length', '0']], reads: { framing: 0 } },
  { what: 'Content-Length twice', fields: [['content-length', '7'], ['content-length', '7']], reads: { framing: 'duplicate Content-Length' } },
  { what: 'Content-Length not digits', fields: [['content-length', '7a']], reads: { framing: 'invalid Content-Length' } },
  { what: 'Content-Length signed', fields: [['content-length', '+7']], reads: { framing: 'invalid Content-Length' } },
  { what: 'Content-Length over 15 digits', fields: [['content-length', '1234567890123456']], reads: { framing: 'invalid Content-Length' } },
  { what: 'chunked', fields: [['transfer-encoding', 'chunked']], reads: { framing: -1 } },
  { what: 'chunked in any case, trimmed', fields: [['transfer-encoding', ' Chunked ']], reads: { framing: -1 } },
  { what: 'another coding', fields: [['transfer-encoding', 'gzip, chunked']], reads: { framing: 'a transfer coding other than chunked' } },
  { what: 'Transfer-Encoding twice', fields: [['transfer-encoding', 'chunked'], ['transfer-encoding', 'chunked']], reads: { framing: 'a transfer coding other than chunked' } },
  {
    what: 'Content-Length and Transfer-Encoding',
    fields: [['content-length', '7'], ['transfer-encoding', 'chunked']],
    reads: { framing: 'both Content-Length and Transfer-Encoding' },
  },
  { what: 'Host twice', fields: [['host', 'a'], ['host', 'a']], reads: { problem: 'duplicate Host' } },
  { what: 'an invalid Host', fields: [['host', 'a b']], reads: { problem: 'invalid Host' } },
  { what: 'an IPv6 Host with a port', fields: [['host', '[::1]:8080']], reads: {} },
  {
    what: 'DEL in any value',
    fields: [['user-agent', 'a\x7fb']],
    reads: { problem: 'a control character in a header value, or a forwarded value that is not visible ASCII' },
  },
  {
    what: 'a Content-Type that is not visible ASCII',
    fields: [['content-type', 'text/é']],
    reads: { problem: 'a control character in a header value, or a forwarded value that is not visible ASCII' },
  },
  {
    what: 'a forwarded value that is not visible ASCII',
    fields: [['x-trace', 'é']],
    forward: ['x-trace'],
    reads: { problem: 'a control character in a header value, or a forwarded value that is not visible ASCII' },
  },
  { what: 'a value that is not forwarded may be any text', fields: [['x-trace', 'é'], ['user-agent', 'ü\t1']], reads: {} },
  { what: 'X-Sluice-Priority lowers the priority', fields: [['x-sluice-priority', '3']], reads: { priority: 3 } },
  { what: 'X-Sluice-Priority never raises it', fields: [['x-sluice-priority', '+9']], reads: { priority: TOKEN_PRIORITY } },
  { what: 'X-Sluice-Priority below the minimum counts as the minimum', fields: [['x-sluice-priority', '-100']], reads: { priority: MIN_PRIORITY } },
  { what: 'X-Sluice-Priority trimmed', fields: [['x-sluice-priority', ' 2 ']], reads: { priority: 2 } },
  { what: 'X-Sluice-Priority not an integer', fields: [['x-sluice-priority', 'high']], reads: { priority: 'X-Sluice-Priority must be an integer' } },
  {
    what: 'X-Sluice-Priority twice',
    fields: [['x-sluice-priority', '1'], ['x-sluice-priority', '2']],
    reads: { priority: 'X-Sluice-Priority appears more than once' },
  },
  { what: 'X-Sluice-Max-Wait-Ms', fields: [['x-sluice-max-wait-ms', '250']], reads: { maxWait: 250 } },
  { what: 'X-Sluice-Max-Wait-Ms 0', fields: [['x-sluice-max-wait-ms', '0']], reads: { maxWait: 0 } },
  { what: 'X-Sluice-Max-Wait-Ms at or above the service wait is the service wait', fields: [['x-sluice-max-wait-ms', '1000']], reads: { maxWait: -1 } },
  {
    what: 'X-Sluice-Max-Wait-Ms negative',
    fields: [['x-sluice-max-wait-ms', '-1']],
    reads: { maxWait: 'X-Sluice-Max-Wait-Ms must be an integer ≥ 0 (milliseconds)' },
  },
  {
    what: 'X-Sluice-Max-Wait-Ms twice',
    fields: [['x-sluice-max-wait-ms', '1'], ['x-sluice-max-wait-ms', '1']],
    reads: { maxWait: 'X-Sluice-Max-Wait-Ms appears more than once' },
  },
  { what: 'the affinity header: its first value', fields: [['x-session', 'a'], ['x-session', 'b']], affinity: 'x-session', reads: { affinity: 'a' } },
  { what: 'no affinity header configured: nothing read', fields: [['x-session', 'a']], reads: {} },
];

test('read: what Sluice reads from the caller headers', () => {
  for (const row of READ) {
    const h = read(row.fields, row.forward, row.affinity);
    const reading: Reading = {
      framing: requestFraming(h),
      problem: headerProblem(h),
      priority: requestPriority(h, TOKEN_PRIORITY, MIN_PRIORITY),
      maxWait: requestMaxWait(h, MAX_WAIT_MS),
      affinity: h.affinity,
    };
    assert.deepEqual(reading, { ...READ_DEFAULT, ...row.reads }, row.what);
  }
});

// ── forward: what the replica receives ──────────────────────────────────────────────────────

const HOST = '10.0.0.5:8000';
const ID = '33cfffdefe15-1';

/** Every caller field a replica never gets, whatever the service forwards. */
const NEVER: Fields = [
  ['authorization', 'Bearer t'],
  ['cookie', 'c=d'],
  ['user-agent', 'curl/8'],
  ['connection', 'keep-alive'],
  ['keep-alive', 'timeout=5'],
  ['te', 'trailers'],
  ['upgrade', 'h2c'],
  ['expect', '100-continue'],
  ['x-forwarded-for', '10.0.0.1'],
  ['x-request-id', 'mine'],
  ['accept-encoding', 'gzip, br'],
  ['x-sluice-priority', '1'],
  ['x-sluice-max-wait-ms', '5'],
];

const FORWARD: readonly {
  what: string;
  method: string;
  fields: Fields;
  forward?: string[];
  affinity?: string;
  /** The body length from the caller's framing (-1: chunked, streamed); a held chunked body's length. */
  bodyLength?: number;
  /** The replica's head after the request line, `host`, `accept-encoding` and `x-request-id`. */
  head: string[];
}[] = [
  {
    what: 'the documented example',
    method: 'POST',
    fields: [['content-type', 'application/json'], ['accept', 'text/event-stream'], ['accept', 'application/json'], ['x-trace', 't1'], ['content-length', '7'], ...NEVER],
    forward: ['x-trace'],
    bodyLength: 7,
    head: ['content-type: application/json', 'accept: text/event-stream, application/json', 'content-length: 7', 'x-trace: t1'],
  },
  { what: 'the first Content-Type only', method: 'POST', fields: [['content-type', 'a/b'], ['content-type', 'c/d']], head: ['content-type: a/b', 'content-length: 0'] },
  { what: 'a GET without a body: no framing', method: 'GET', fields: NEVER, head: [] },
  { what: 'a DELETE without a body: no framing', method: 'DELETE', fields: [], head: [] },
  { what: 'a POST without a body: content-length 0', method: 'POST', fields: [], head: ['content-length: 0'] },
  { what: 'a PUT without a body: content-length 0', method: 'PUT', fields: [], head: ['content-length: 0'] },
  { what: 'a PATCH without a body: content-length 0', method: 'PATCH', fields: [], head: ['content-length: 0'] },
  { what: 'the caller Content-Length, same value', method: 'POST', fields: [['content-length', '12']], bodyLength: 12, head: ['content-length: 12'] },
  { what: 'a chunked body streamed', method: 'POST', fields: [['transfer-encoding', 'chunked']], bodyLength: -1, head: ['transfer-encoding: chunked'] },
  { what: 'a chunked body held whole: its length', method: 'POST', fields: [['transfer-encoding', 'chunked']], bodyLength: 12, head: ['content-length: 12'] },
  {
    what: 'forwardHeaders in the caller order, repeated ones each',
    method: 'GET',
    fields: [['x-b', '1'], ['x-a', '2'], ['x-b', '3'], ['x-c', 'no']],
    forward: ['x-a', 'x-b'],
    head: ['x-b: 1', 'x-a: 2', 'x-b: 3'],
  },
  { what: 'the affinity header is read, not forwarded', method: 'GET', fields: [['x-session', 's']], affinity: 'x-session', head: [] },
  { what: 'the affinity header forwarded when listed', method: 'GET', fields: [['x-session', 's']], affinity: 'x-session', forward: ['x-session'], head: ['x-session: s'] },
  { what: 'X-Sluice-* never, even if listed', method: 'GET', fields: NEVER, forward: ['x-sluice-priority', 'x-sluice-max-wait-ms'], head: [] },
];

test('forward: what the replica receives of the caller headers', () => {
  for (const row of FORWARD) {
    const h = read(row.fields, row.forward, row.affinity);
    const head = requestHead(row.method, '/v1/x?q=1', HOST, h, row.bodyLength ?? 0, ID, h.traceparent, h.tracestate);
    const expected = [`${row.method} /v1/x?q=1 HTTP/1.1`, `host: ${HOST}`, 'accept-encoding: identity', `x-request-id: ${ID}`, ...row.head, '', ''];
    assert.deepEqual(head.split('\r\n'), expected, row.what);
  }
});

// ── return: what the caller gets of the replica's head ──────────────────────────────────────

const RETURN: readonly {
  what: string;
  method?: string;
  /** The replica's head (and body), lines joined with CRLF. */
  answer: string[];
  closeAfter?: boolean;
  /** The caller's status line and headers, in order. */
  head?: string[];
  /** The replica's Content-Length: the caller's framing (uWS writes it with the body; -1: chunked). */
  length?: number;
  /** The parser refuses the answer (a 502 before anything is relayed). */
  refused?: string;
}[] = [
  {
    what: 'Content-Type and Content-Length; nothing else',
    answer: [
      'HTTP/1.1 200 OK',
      'Set-Cookie: session=secret',
      'Server: replica/1.0',
      'Content-Type: application/json; charset=utf-8',
      'Cache-Control: no-store',
      'Content-Encoding: identity',
      'X-Request-Id: the-replica-s',
      'Connection: keep-alive',
      'Keep-Alive: timeout=5',
      'Date: Wed, 25 Nov 2026 11:37:30 GMT',
      'Content-Length: 2',
      '',
      'ok',
    ],
    head: ['200 OK', 'content-type: application/json; charset=utf-8', 'x-request-id: r-1'],
    length: 2,
  },
  {
    what: 'the first Content-Type, any case, trimmed',
    answer: ['HTTP/1.1 201 Whatever', 'CONTENT-TYPE: \t text/plain \t', 'content-type: text/html', 'content-length: 0', '', ''],
    head: ['201 Created', 'content-type: text/plain', 'x-request-id: r-1'],
    length: 0,
  },
  { what: 'no Content-Type: none', answer: ['HTTP/1.1 200 OK', 'Content-Length: 0', '', ''], head: ['200 OK', 'x-request-id: r-1'], length: 0 },
  {
    what: 'a chunked answer: chunked to the caller; trailers dropped',
    answer: ['HTTP/1.1 200 OK', 'Content-Type: text/event-stream', 'Transfer-Encoding: chunked', '', '2', 'ok', '0', 'Content-Type: text/html', 'X-Trailer: t', '', ''],
    head: ['200 OK', 'content-type: text/event-stream', 'x-request-id: r-1'],
    length: -1,
  },
  {
    what: 'an answer delimited by the close: chunked to the caller',
    answer: ['HTTP/1.0 200 OK', 'Content-Type: text/plain', '', 'ok'],
    head: ['200 OK', 'content-type: text/plain', 'x-request-id: r-1'],
    length: -1,
  },
  {
    what: 'a 1xx answer: its fields are not the answer fields',
    answer: ['HTTP/1.1 103 Early Hints', 'Link: </a.css>', 'Content-Type: text/html', '', 'HTTP/1.1 200 OK', 'Content-Length: 2', '', 'ok'],
    head: ['200 OK', 'x-request-id: r-1'],
    length: 2,
  },
  {
    what: 'a HEAD answer keeps the replica Content-Length',
    method: 'HEAD',
    answer: ['HTTP/1.1 200 OK', 'Content-Type: application/json', 'Content-Length: 42', '', ''],
    head: ['200 OK', 'content-type: application/json', 'x-request-id: r-1', 'content-length: 42'],
    length: 42,
  },
  { what: 'a HEAD answer without one has none', method: 'HEAD', answer: ['HTTP/1.1 200 OK', '', ''], head: ['200 OK', 'x-request-id: r-1'], length: -1 },
  { what: 'a 204 has no Content-Length', answer: ['HTTP/1.1 204 No Content', 'Content-Length: 0', '', ''], head: ['204 No Content', 'x-request-id: r-1'], length: 0 },
  { what: 'a 304 has no Content-Length', answer: ['HTTP/1.1 304 Not Modified', 'Content-Length: 10', '', ''], head: ['304 Not Modified', 'x-request-id: r-1'], length: 10 },
  { what: 'a code without a registered phrase', answer: ['HTTP/1.1 299 Mine', 'Content-Length: 0', '', ''], head: ['299 ', 'x-request-id: r-1'], length: 0 },
  { what: 'the replica error, relayed as is', answer: ['HTTP/1.1 503 Busy', 'Content-Type: text/plain', 'Retry-After: 1', 'Content-Length: 4', '', 'busy'], head: ['503 Service Unavailable', 'content-type: text/plain', 'x-request-id: r-1'], length: 4 },
  {
    what: 'while the caller still uploads: Connection: close',
    answer: ['HTTP/1.1 413 Payload Too Large', 'Content-Length: 0', '', ''],
    closeAfter: true,
    head: ['413 Payload Too Large', 'x-request-id: r-1', 'connection: close'],
    length: 0,
  },
  { what: 'refused: both framings', answer: ['HTTP/1.1 200 OK', 'Content-Type: text/plain', 'Content-Length: 2', 'Transfer-Encoding: chunked', '', ''], refused: 'both Content-Length and Transfer-Encoding' },
  { what: 'refused: two Content-Length fields', answer: ['HTTP/1.1 200 OK', 'Content-Length: 2', 'Content-Length: 2', '', 'ok'], refused: 'several Content-Length fields' },
];

/** Records what is written to the caller's head. */
class HeadRecord {
  readonly lines: string[] = [];
  writeStatus(line: string): void {
    this.lines.push(line);
  }
  writeHeader(name: string, value: string): void {
    this.lines.push(`${name}: ${value}`);
  }
}

interface Returned {
  head?: string[];
  length?: number;
  refused?: string;
}

/**
 * The replica's bytes through the parser, in pieces of `step` bytes through a scratch buffer
 * overwritten after each call (the parser's slices are valid only during a call), then the
 * relay's policy on what it reported.
 */
function answerThrough(bytes: Buffer, method: string, closeAfter: boolean, step: number): Returned {
  const kept: ReturnedFields = { answerContentType: undefined };
  let status = 0;
  let contentLength = -2;
  const parser = new ResponseParser({
    onResponseField: (buf, nameStart, nameEnd, valueStart, valueEnd) => returnField(kept, buf, nameStart, nameEnd, valueStart, valueEnd),
    onResponseHead: (s, length) => {
      status = s;
      contentLength = length;
    },
    onResponseBody: () => undefined,
  });
  parser.reset(method !== 'HEAD');
  const scratch = Buffer.alloc(step + 8);
  let result: number = -1;
  for (let at = 0; at < bytes.length && result !== PARSE_DONE && result !== PARSE_ERROR; at += step) {
    const piece = bytes.subarray(at, Math.min(at + step, bytes.length));
    piece.copy(scratch, 4);
    result = parser.execute(scratch, 4, 4 + piece.length);
    scratch.fill(0x21);
  }
  if (result !== PARSE_DONE && result !== PARSE_ERROR) result = parser.finish();
  if (result === PARSE_ERROR) return { refused: parser.error };
  const out = new HeadRecord();
  writeReturnedHead(out, status, kept.answerContentType, contentLength, bodylessAnswer(method, status), 'r-1', closeAfter);
  return { head: out.lines, length: contentLength };
}

test('return: what the caller gets of the replica head', () => {
  for (const row of RETURN) {
    const bytes = Buffer.from(row.answer.join('\r\n'), 'latin1');
    const expected: Returned = row.refused !== undefined ? { refused: row.refused } : { head: row.head!, length: row.length! };
    for (const step of [bytes.length, 1, 7]) {
      assert.deepEqual(answerThrough(bytes, row.method ?? 'POST', row.closeAfter ?? false, step), expected, `${row.what} (pieces of ${step} bytes)`);
    }
  }
});

test('return: every field of the final head is reported, in order, framing fields included; none of a 1xx or the trailers', () => {
  const bytes = Buffer.from(
    ['HTTP/1.1 100 Continue', 'X-Interim: 1', '', 'HTTP/1.1 200 OK', 'X-A:  one two ', 'transfer-encoding: chunked', 'Connection: keep-alive', 'X-Empty:', '', '0', 'X-Trailer: t', '', ''].join('\r\n'),
    'latin1',
  );
  const fields: string[] = [];
  const parser = new ResponseParser({
    onResponseField: (buf, nameStart, nameEnd, valueStart, valueEnd) => fields.push(`${buf.toString('latin1', nameStart, nameEnd)}=${buf.toString('latin1', valueStart, valueEnd)}`),
    onResponseHead: () => fields.push('(head)'),
    onResponseBody: () => undefined,
  });
  parser.reset(true);
  assert.equal(parser.execute(bytes, 0, bytes.length), PARSE_DONE);
  assert.deepEqual(fields, ['X-A=one two', 'transfer-encoding=chunked', 'Connection=keep-alive', 'X-Empty=', '(head)']);
});

test('return: what the relay keeps is per attempt: a refused head reports fields, then no head', () => {
  const kept: ReturnedFields = { answerContentType: undefined };
  let heads = 0;
  const parser = new ResponseParser({
    onResponseField: (buf, nameStart, nameEnd, valueStart, valueEnd) => returnField(kept, buf, nameStart, nameEnd, valueStart, valueEnd),
    onResponseHead: () => heads++,
    onResponseBody: () => undefined,
  });
  parser.reset(true);
  const bytes = Buffer.from('HTTP/1.1 200 OK\r\nContent-Type: text/x-refused\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n', 'latin1');
  assert.equal(parser.execute(bytes, 0, bytes.length), PARSE_ERROR);
  assert.equal(heads, 0);
  // Which is why RelayRequest clears it when the next attempt gets its connection.
  assert.equal(kept.answerContentType, 'text/x-refused');
});
