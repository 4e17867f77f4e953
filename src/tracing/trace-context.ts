// W3C Trace Context (https://www.w3.org/TR/trace-context/): the caller's `traceparent` read, the
// replica's written, and the ids of Sluice's own spans.
//
// `traceparent` is `{version}-{trace-id}-{parent-id}-{flags}`: 2, 32, 16 and 2 lowercase hex
// digits. Version `ff` is invalid; a future version (above `00`) is read by its first four fields
// and may carry more after a `-`; an all-zero trace id or parent id is invalid. A caller's header
// that is not valid starts a new trace (and its `tracestate` is dropped with it, as the
// recommendation says). Reading a valid header allocates two strings (the ids, tracer.ts) and only
// for a request that is sampled: `sampledFlag` and `validTraceparent` look at the characters in place.
import { randomFillSync } from 'node:crypto';

const ZEROS_32 = '0'.repeat(32);
const ZEROS_16 = '0'.repeat(16);

/** A lowercase hex digit (the header is case-sensitive: uppercase is invalid). */
function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66);
}

function hexRun(s: string, from: number, length: number): boolean {
  for (let i = from; i < from + length; i++) if (!isHex(s.charCodeAt(i))) return false;
  return true;
}

/** True when `value` is a `traceparent` Sluice continues (see the file comment). */
export function validTraceparent(value: string): boolean {
  if (value.length < 55) return false;
  if (!hexRun(value, 0, 2) || value.startsWith('ff')) return false;
  if (value.charCodeAt(2) !== 0x2d || value.charCodeAt(35) !== 0x2d || value.charCodeAt(52) !== 0x2d) return false;
  if (!hexRun(value, 3, 32) || !hexRun(value, 36, 16) || !hexRun(value, 53, 2)) return false;
  // Version 00 is exactly 55 characters; a later version may go on after a '-'.
  if (value.length > 55 && (value.startsWith('00') || value.charCodeAt(55) !== 0x2d)) return false;
  return !zeros(value, 3, 32) && !zeros(value, 36, 16);
}

/** The `length` characters of `s` from `from` are all '0' (looked at in place). */
function zeros(s: string, from: number, length: number): boolean {
  for (let i = from; i < from + length; i++) if (s.charCodeAt(i) !== 0x30) return false;
  return true;
}

/** The sampled bit of a valid `traceparent`'s flags. */
export function sampledFlag(value: string): boolean {
  const low = value.charCodeAt(54);
  // The last hex digit's lowest bit: '1', '3', …, '9', 'b', 'd', 'f'.
  return ((low <= 0x39 ? low - 0x30 : low - 0x57) & 1) === 1;
}

/** The `traceparent` naming span `spanId` of trace `traceId`, sampled. */
export function formatTraceparent(traceId: string, spanId: string): string {
  return `00-${traceId}-${spanId}-01`;
}

/**
 * Random ids from a pool of bytes refilled by the system's generator (one call per 4 KiB, not per
 * id): W3C asks for random trace ids, and an id only sampled requests pay for.
 */
const POOL = Buffer.alloc(4096);
let used = POOL.length;

function randomHex(bytes: number): string {
  if (used + bytes > POOL.length) {
    randomFillSync(POOL);
    used = 0;
  }
  const hex = POOL.toString('hex', used, used + bytes);
  used += bytes;
  // All zeros is invalid: vanishingly rare, and then the next bytes are taken.
  return hex === (bytes === 16 ? ZEROS_32 : ZEROS_16) ? randomHex(bytes) : hex;
}

export function newTraceId(): string {
  return randomHex(16);
}

export function newSpanId(): string {
  return randomHex(8);
}
