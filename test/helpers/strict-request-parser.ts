// A strict reference parser for HTTP/1.1 requests (RFC 9112), for the fuzz test's oracle: it
// splits a byte stream into the requests a strict server would see, and stops at the first byte
// that is not valid. One documented exception: chunked bodies are decoded the way uWS decodes
// them (docs/security.md), since Sluice only ever sees uWS's decoded bytes; and
// a field value loses what uWS strips from its start and its end (bytes at or below 0x20 or
// from 0x80 up; a colon after the separator stays, as uWS keeps it); and a field line with an empty name ends the fields uWS reports (the lines after it
// are checked but their fields are not seen) — so the oracle checks everything except these
// three known uWS leniencies.

export interface StrictRequest {
  method: string;
  target: string;
  /** Field names in lower case, values with surrounding whitespace removed, in arrival order. */
  fields: [string, string][];
  framing: 'length' | 'chunked' | 'none';
  body: Buffer;
  /** The whole body was in the bytes (false: the stream ended inside the body). */
  complete: boolean;
}

const TCHAR = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\/[\x21\x22\x24-\x7e]*) HTTP\/1\.1$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;

/** Every request a strict server would read from `bytes`, in order; stops at the first invalid one. */
export function parseStrict(bytes: Buffer): StrictRequest[] {
  const out: StrictRequest[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    const parsed = parseOne(bytes, pos);
    if (parsed === undefined) break;
    out.push(parsed.request);
    if (!parsed.request.complete) break;
    pos = parsed.end;
  }
  return out;
}

function parseOne(bytes: Buffer, start: number): { request: StrictRequest; end: number } | undefined {
  // The head: lines ended by CRLF only, up to an empty line.
  const lines: string[] = [];
  let pos = start;
  for (;;) {
    let i = pos;
    while (i < bytes.length && bytes[i] !== 0x0d && bytes[i] !== 0x0a) i++;
    if (i >= bytes.length) return undefined; // incomplete head
    if (bytes[i] === 0x0a || i + 1 >= bytes.length || bytes[i + 1] !== 0x0a) return undefined; // bare LF or CR
    const line = bytes.toString('latin1', pos, i);
    pos = i + 2;
    if (line === '') break;
    lines.push(line);
  }
  const requestLine = REQUEST_LINE.exec(lines[0] ?? '');
  if (requestLine === null) return undefined;
  const fields: [string, string][] = [];
  let hidden = false;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon < 0) return undefined;
    if (colon === 0) {
      // Not a valid field line; uWS reads it as the end of the fields (the third allowance).
      hidden = true;
      continue;
    }
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).replace(/^[\x00-\x20\x80-\xff]+/, '').replace(/[\x00-\x20\x80-\xff]+$/, '');
    if (!TCHAR.test(name) || !FIELD_VALUE.test(value)) return undefined; // also: obs-fold, space before the colon
    if (!hidden) fields.push([name.toLowerCase(), value]);
  }
  const all = (name: string): string[] => fields.filter(([n]) => n === name).map(([, v]) => v);
  const hosts = all('host');
  if (hosts.length !== 1 || !HOST.test(hosts[0]!)) return undefined;
  const lengths = all('content-length');
  const codings = all('transfer-encoding');
  const request: StrictRequest = { method: requestLine[1]!, target: requestLine[2]!, fields, framing: 'none', body: Buffer.alloc(0), complete: true };
  if (codings.length > 0) {
    if (lengths.length > 0 || codings.length > 1 || codings[0]!.toLowerCase() !== 'chunked') return undefined;
    request.framing = 'chunked';
    const decoded = decodeChunkedLikeUws(bytes, pos);
    if (decoded === 'error') return undefined;
    request.body = decoded.body;
    request.complete = decoded.complete;
    return { request, end: decoded.end };
  }
  if (lengths.length > 1) return undefined;
  if (lengths.length === 1) {
    if (!/^[0-9]{1,15}$/.test(lengths[0]!)) return undefined;
    const length = Number(lengths[0]);
    request.framing = 'length';
    request.body = bytes.subarray(pos, Math.min(bytes.length, pos + length));
    request.complete = pos + length <= bytes.length;
    return { request, end: pos + length };
  }
  return { request, end: pos };
}

/**
 * uWS's chunked decoder (uWebSockets src/ChunkedEncoding.h, checked against this build by the
 * hostile-framing tests): a chunk-size line's bytes above 0x20 are hex digits where `:`…`@` and
 * `g`/`G` count 10…16 (anything else above 0x20 is an error, as is a size of 16 hex digits or
 * more); the first byte at or below 0x20 ends the digits and everything up to LF is skipped;
 * the two bytes after chunk data are skipped unchecked; after the last chunk's size line, two
 * more bytes are skipped and the body is complete. A byte of 0x80 or more ends the digits (uWS
 * compares a signed char). An invalid size after some chunks cuts the body short there; one
 * before any chunk refuses the request (`error`).
 */
export function decodeChunkedLikeUws(bytes: Buffer, start: number): { body: Buffer; complete: boolean; end: number } | 'error' {
  const parts: Buffer[] = [];
  let pos = start;
  for (;;) {
    let size = 0n;
    // `char` is signed in uWS's loop condition: a byte of 0x80 or more ends the digits like a space.
    while (pos < bytes.length && bytes[pos]! > 32 && bytes[pos]! < 0x80) {
      let digit = bytes[pos]!;
      if (digit >= 0x61) digit -= 0x61 - 0x3a;
      else if (digit >= 0x41) digit -= 0x41 - 0x3a;
      const number = digit - 0x30;
      // uWS has emitted the chunks before this one: the request is cut short there, not undone.
      if (number < 0 || number > 16 || size >= 1n << 56n) return parts.length === 0 ? 'error' : { body: Buffer.concat(parts), complete: false, end: bytes.length };
      size = size * 16n + BigInt(number);
      pos++;
    }
    while (pos < bytes.length && bytes[pos] !== 0x0a) pos++;
    if (pos >= bytes.length) return { body: Buffer.concat(parts), complete: false, end: pos };
    pos++; // the LF
    if (size === 0n) return { body: Buffer.concat(parts), complete: true, end: Math.min(bytes.length, pos + 2) };
    const n = Number(size);
    parts.push(bytes.subarray(pos, Math.min(bytes.length, pos + n)));
    if (pos + n + 2 > bytes.length) return { body: Buffer.concat(parts), complete: false, end: bytes.length };
    pos += n + 2;
  }
}
