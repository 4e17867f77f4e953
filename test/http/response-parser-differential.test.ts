// Differential fuzz test of the upstream response parser (docs/architecture.md#fact-13): a few thousand
// generated and mutated response byte streams go to Sluice's ResponseParser and to llhttp (through
// undici, reading them from a raw TCP server). Both must agree on accept or refuse, and on what
// both accept: status, framing, body bytes and the head's fields as the parser reports them to the
// relay (llhttp's trailing spaces in a value aside). Deterministic (seeded PRNG; FUZZ_SEED and
// FUZZ_CASES override); a failure names the seed and the case.
//
// Where Sluice is deliberately different from llhttp the difference is an explicit allowance
// below, counted and reported, never a silent skip.
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Pool, request } from 'undici';
import { PARSE_DONE, PARSE_ERROR, ResponseParser } from '../../src/http/response-parser.js';

const SEED = Number(process.env['FUZZ_SEED'] ?? 20261122);
const CASES = Number(process.env['FUZZ_CASES'] ?? 3000);

/**
 * Sluice refuses, llhttp accepts: each reason is a rule Sluice keeps on purpose.
 * - a transfer coding other than chunked: Sluice relays no coded bodies (fact 13); llhttp reads
 *   such a body until the close;
 * - Transfer-Encoding in an HTTP/1.0 response: faulty framing (RFC 9112 section 6.1);
 * - status codes outside 100–599 and 101 Switching Protocols (never asked for);
 * - a reason phrase with control characters (NUL, DEL, ...): RFC 9112 section 4 allows HTAB,
 *   SP, VCHAR and obs-text only; llhttp lets them through;
 * - chunk sizes over 13 hex digits (beyond safe integers; no replica sends them);
 * - an empty line (CRLF or LF) before the status line, which llhttp skips: RFC 9112 section 2.2
 *   allows that robustness for requests only;
 * - a chunk extension with an empty name or value (`;=b`, `;a=`, `;;a`, a `;` that ends the
 *   line), or a value that is neither a token nor one quoted string (`;a=b"c"`, `;a="b"c`):
 *   RFC 9112 section 7.1.1 wants a token for the name and a token or a quoted string for the
 *   value;
 * - a control character (DEL, …) inside a chunk extension's quoted string: RFC 9110 section 5.6.4
 *   leaves them out of qdtext;
 * - a bare CR after the status code (`HTTP/1.1 200\r\r…`), which llhttp takes as the line's end:
 *   RFC 9112 section 2.2 says a bare CR is refused or replaced, never a line ending.
 */
const STRICTER = new Set([
  'invalid reason phrase',
  'a transfer coding other than chunked',
  'Transfer-Encoding in an HTTP/1.0 response',
  'status code out of range',
  '101 Switching Protocols was not asked for',
  'chunk size too large',
  'empty line before the status line',
  'empty chunk extension name or value',
  'chunk extension value neither a token nor a quoted string',
  'control character in a chunk extension',
  'bare CR in the status line',
]);

/**
 * Sluice accepts, undici refuses: a 204 or 304 answer with a non-zero Content-Length. llhttp
 * reads no body for them, as Sluice does (RFC 9110 sections 6.4.1 and 8.6; a 304 may carry the
 * representation's length); undici's own length check then counts the missing body as a
 * mismatch. Bytes after such an answer are leftovers: the connection is not reused.
 */
function undiciRefusesBodylessLength(mine: Verdict, theirs: Verdict): boolean {
  return (mine.status === 204 || mine.status === 304) && theirs.reason === 'Response body length does not match content-length header';
}

/**
 * Sluice accepts, undici refuses: `100 Continue` that was not asked for. undici (not llhttp)
 * refuses it; RFC 9110 section 15.2 says a client must parse and skip unexpected 1xx answers.
 */
function undiciRefusesUnaskedContinue(bytes: Buffer): boolean {
  return /^HTTP\/1\.[01] 100[ \r]/.test(bytes.toString('latin1', 0, 13));
}

interface Verdict {
  ok: boolean;
  reason: string;
  status: number;
  framing: string;
  body: string;
  /** The head's fields as undici lists them: names in lower case, a repeated name's values in an array (JSON). */
  fields: string;
}

/** Adds a field to `into` as undici's parseHeaders does. */
function addField(into: Record<string, string | string[]>, name: string, value: string): void {
  const had = into[name];
  if (had === undefined) into[name] = value;
  else if (Array.isArray(had)) had.push(value);
  else into[name] = [had, value];
}

// ── generation ───────────────────────────────────────────────────────────────────────────────

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Case {
  bytes: Buffer;
  head: boolean;
  /** Where the bytes are split into separate writes and parser calls. */
  splits: number[];
}

function generate(rand: () => number, index: number): Case {
  const int = (n: number): number => Math.floor(rand() * n);
  const pick = <T>(list: readonly T[]): T => list[int(list.length)]!;
  const head = rand() < 0.08;
  let text = '';
  if (rand() < 0.1) text += pick(['HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n', 'HTTP/1.1 102 Processing\r\n\r\n']);
  const version = rand() < 0.1 ? 'HTTP/1.0' : 'HTTP/1.1';
  const status = pick([200, 200, 200, 201, 204, 304, 404, 500, 503, 299, 418]);
  const reason = pick(['OK', '', 'Some Reason', 'x\tTab', 'caf\xe9']);
  text += reason === '' && rand() < 0.5 ? `${version} ${status}\r\n` : `${version} ${status} ${reason}\r\n`;
  const body = Buffer.from(Array.from({ length: pick([0, 1, 5, 40, 300]) }, () => 32 + int(90))).toString('latin1');
  const framing = pick(['length', 'length', 'chunked', 'chunked', 'close']);
  const fields: string[] = [];
  if (rand() < 0.7) fields.push(`${pick(['Content-Type', 'content-type', 'CONTENT-TYPE'])}: ${pick(['text/plain', 'application/json; charset=utf-8', ''])}`);
  if (rand() < 0.3) fields.push(`Connection: ${pick(['close', 'keep-alive', 'Keep-Alive, Upgrade', 'foo'])}`);
  if (rand() < 0.2) fields.push(`Keep-Alive: timeout=${int(10)}, max=100`);
  if (rand() < 0.3) fields.push(`X-${pick(['Any', 'Token!#$%&\'*+-.^_`|~', 'a'])}:${pick([' v', '', '\tv\t', ' a  b ', ' \x80\xff'])}`);
  if (framing === 'length') fields.push(`${pick(['Content-Length', 'content-length'])}:${pick([' ', '', '  '])}${body.length}${pick(['', ' ', '\t'])}`);
  if (framing === 'chunked') fields.push(`${pick(['Transfer-Encoding', 'transfer-encoding'])}: ${pick(['chunked', 'chunked', 'Chunked', ' chunked '])}`);
  // Shuffle the fields.
  for (let i = fields.length - 1; i > 0; i--) {
    const j = int(i + 1);
    [fields[i], fields[j]] = [fields[j]!, fields[i]!];
  }
  for (const f of fields) text += `${f}\r\n`;
  text += '\r\n';
  if (framing === 'chunked') {
    let rest = body;
    while (rest.length > 0) {
      const n = Math.min(rest.length, 1 + int(60));
      const size = n.toString(16);
      text += `${pick([size, size.toUpperCase(), `00${size}`])}${pick(['', '', ';ext', ';a=b', ';a="q\\"s"', ' ; a = b'])}\r\n${rest.slice(0, n)}\r\n`;
      rest = rest.slice(n);
    }
    text += `0${pick(['', '', ';last'])}\r\n${rand() < 0.2 ? 'Trailer-Field: t\r\n' : ''}\r\n`;
  } else {
    text += body;
  }
  if (rand() < 0.1) text += pick(['HTTP/1.1 200 OK\r\n\r\n', 'garbage', '\r\n']);
  let bytes: Buffer = Buffer.from(text, 'latin1');
  // Most cases are mutated: 1–3 byte edits, sometimes a cut.
  if (index % 5 !== 0) {
    for (let m = 1 + int(3); m > 0; m--) bytes = mutate(bytes, rand, int, pick);
  }
  const splits: number[] = [];
  for (let k = int(4); k > 0; k--) splits.push(int(bytes.length));
  splits.sort((a, b) => a - b);
  return { bytes, head, splits };
}

const INTERESTING = [13, 10, 32, 9, 58, 59, 61, 34, 44, 48, 49, 97, 70, 0, 0x7f, 0x80, 0xff, 92];

function mutate(bytes: Buffer, rand: () => number, int: (n: number) => number, pick: <T>(l: readonly T[]) => T): Buffer {
  if (bytes.length === 0) return bytes;
  const at = int(bytes.length);
  switch (int(5)) {
    case 0: {
      const copy = Buffer.from(bytes);
      copy[at] = rand() < 0.7 ? pick(INTERESTING) : int(256);
      return copy;
    }
    case 1:
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]);
    case 2:
      return Buffer.concat([bytes.subarray(0, at), Buffer.from([pick(INTERESTING)]), bytes.subarray(at)]);
    case 3: {
      const to = Math.min(bytes.length, at + 1 + int(12));
      return Buffer.concat([bytes.subarray(0, to), bytes.subarray(at, to), bytes.subarray(to)]);
    }
    default:
      return bytes.subarray(0, at);
  }
}

// ── the two parsers ──────────────────────────────────────────────────────────────────────────

/** Sluice's parser, fed piece by piece through a scratch buffer that is overwritten after each call. */
function ours(c: Case): Verdict {
  const parts: Buffer[] = [];
  let status = 0;
  const fields: Record<string, string | string[]> = {};
  const parser = new ResponseParser({
    onResponseField(buf, nameStart, nameEnd, valueStart, valueEnd) {
      addField(fields, buf.toString('latin1', nameStart, nameEnd).toLowerCase(), buf.toString('latin1', valueStart, valueEnd));
    },
    onResponseHead(s) {
      status = s;
    },
    onResponseBody(chunk) {
      parts.push(Buffer.from(chunk));
    },
  });
  parser.reset(!c.head);
  const scratch: Buffer = Buffer.alloc(c.bytes.length + 16);
  const bounds = [0, ...c.splits, c.bytes.length];
  let result: number = -1;
  for (let i = 0; i + 1 < bounds.length && result !== PARSE_DONE && result !== PARSE_ERROR; i++) {
    const piece = c.bytes.subarray(bounds[i], bounds[i + 1]);
    if (piece.length === 0) continue;
    piece.copy(scratch, 8);
    result = parser.execute(scratch, 8, 8 + piece.length);
    scratch.fill(0x0a);
  }
  if (result !== PARSE_DONE && result !== PARSE_ERROR) result = parser.finish();
  if (result === PARSE_ERROR) return { ok: false, reason: parser.error, status: 0, framing: '', body: '', fields: '' };
  return { ok: true, reason: '', status, framing: parser.framing, body: Buffer.concat(parts).toString('latin1'), fields: JSON.stringify(fields) };
}

let server: Server;
let pool: Pool;
const cases = new Map<string, Case>();

before(async () => {
  server = createServer((socket: Socket) => {
    let seen = Buffer.alloc(0);
    socket.on('data', (data: Buffer) => {
      seen = Buffer.concat([seen, data]);
      const end = seen.indexOf('\r\n\r\n');
      if (end < 0) return;
      const path = seen.toString('latin1', 0, end).split(' ')[1]!;
      const c = cases.get(path)!;
      const bounds = [0, ...c.splits, c.bytes.length];
      for (let i = 0; i + 1 < bounds.length; i++) socket.write(c.bytes.subarray(bounds[i], bounds[i + 1]));
      socket.end();
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 16, pipelining: 1 });
});

after(async () => {
  await pool.destroy();
  server.close();
});

/**
 * undici's headers with the spaces and tabs after each value removed: llhttp keeps them, Sluice
 * does not (RFC 9110 section 5.5: they are not part of the field value).
 */
function trimmedValues(h: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const trim = (v: string): string => v.replace(/[ \t]+$/, '');
  for (const [name, value] of Object.entries(h)) if (value !== undefined) out[name] = Array.isArray(value) ? value.map(trim) : trim(value);
  return out;
}

/** llhttp through undici: the same bytes from a server that closes after writing them. */
async function reference(path: string, c: Case): Promise<Verdict> {
  try {
    const res = await request(`http://x${path}`, { dispatcher: pool, method: c.head ? 'HEAD' : 'GET', reset: true });
    const body = Buffer.from(await res.body.arrayBuffer()).toString('latin1');
    const h = res.headers;
    const bodyless = c.head || res.statusCode === 204 || res.statusCode === 304;
    const framing = bodyless ? 'none' : h['transfer-encoding'] !== undefined ? 'chunked' : h['content-length'] !== undefined ? 'length' : 'close';
    return { ok: true, reason: '', status: res.statusCode, framing, body, fields: JSON.stringify(trimmedValues(h)) };
  } catch (err) {
    return { ok: false, reason: (err as Error).message, status: 0, framing: '', body: '', fields: '' };
  }
}

test(`the response parser agrees with llhttp on ${CASES} generated and mutated responses (seed ${SEED})`, async () => {
  const rand = prng(SEED);
  const all = Array.from({ length: CASES }, (_, i) => generate(rand, i));
  const allowed = new Map<string, number>();
  let accepted = 0;
  let refused = 0;
  const problems: string[] = [];
  const batch = 32;
  for (let start = 0; start < all.length; start += batch) {
    await Promise.all(
      all.slice(start, start + batch).map(async (c, k) => {
        const index = start + k;
        const path = `/case/${index}`;
        cases.set(path, c);
        const mine = ours(c);
        const theirs = await reference(path, c);
        cases.delete(path);
        const show = (): string =>
          `seed ${SEED} case ${index} (${c.head ? 'HEAD' : 'GET'}, splits ${JSON.stringify(c.splits)}): ${JSON.stringify(c.bytes.toString('latin1'))}\n  sluice: ${JSON.stringify(mine)}\n  llhttp: ${JSON.stringify(theirs)}`;
        if (!mine.ok && theirs.ok && STRICTER.has(mine.reason)) {
          allowed.set(mine.reason, (allowed.get(mine.reason) ?? 0) + 1);
          return;
        }
        if (mine.ok && !theirs.ok && undiciRefusesUnaskedContinue(c.bytes)) {
          allowed.set('unasked 100 Continue (undici refuses)', (allowed.get('unasked 100 Continue (undici refuses)') ?? 0) + 1);
          return;
        }
        if (mine.ok && !theirs.ok && undiciRefusesBodylessLength(mine, theirs)) {
          allowed.set('204/304 with Content-Length (undici refuses)', (allowed.get('204/304 with Content-Length (undici refuses)') ?? 0) + 1);
          return;
        }
        if (mine.ok !== theirs.ok) {
          problems.push(`accept/refuse differ: ${show()}`);
          return;
        }
        if (!mine.ok) {
          refused++;
          return;
        }
        accepted++;
        if (mine.status !== theirs.status || mine.framing !== theirs.framing || mine.body !== theirs.body || mine.fields !== theirs.fields) problems.push(`answers differ: ${show()}`);
      }),
    );
  }
  console.log(`# differential: ${accepted} accepted by both, ${refused} refused by both, allowances ${JSON.stringify(Object.fromEntries(allowed))}`);
  assert.equal(problems.length, 0, `${problems.length} disagreements; first ones:\n${problems.slice(0, 5).join('\n')}`);
  // The generator must exercise both sides.
  assert.ok(accepted > CASES / 10 && refused > CASES / 10, `accepted ${accepted}, refused ${refused}`);
});
