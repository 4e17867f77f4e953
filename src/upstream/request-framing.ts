// Chunked framing of a request body written with its head (connection.ts `send`, `sendWhole`):
// the size line before the first chunk's bytes, the CRLF (and the last chunk) after them, and one
// buffer holding all three, so head and body go out in one write (docs/architecture.md#fact-12).

/** Chunked framing of a request body sent with its head: the first chunk's size line, or the end. */
export function chunkPrefix(size: number, last: boolean): string {
  return size > 0 ? `${size.toString(16)}\r\n` : last ? '0\r\n\r\n' : '';
}

/** Chunked framing after the first chunk's bytes. */
export function chunkSuffix(size: number, last: boolean): string {
  return size === 0 ? '' : last ? '\r\n0\r\n\r\n' : '\r\n';
}

/** One buffer: `prefix` (latin1), `body`, `suffix` (latin1). */
export function joined(prefix: string, body: Uint8Array, suffix: string): Buffer {
  const size = body.length;
  const out = Buffer.allocUnsafe(prefix.length + size + suffix.length);
  out.write(prefix, 0, 'latin1');
  out.set(body, prefix.length);
  if (suffix !== '') out.write(suffix, prefix.length + size, 'latin1');
  return out;
}
