// The OTLP/protobuf encoding of a batch of traced requests (an `ExportTraceServiceRequest`,
// opentelemetry/proto/collector/trace/v1/trace_service.proto), written straight from their
// recorders by span-records.ts's `writeSpans` into one reused buffer, for the OpenTelemetry SDK's
// OTLP/HTTP exporter to send (span-export.ts hands it to the SDK's export delegate as its
// serializer: the SDK's transport, retries, timeout and headers, not its encoding).
//
// Why not the SDK's encoding: measured on this machine, building the SDK's `ReadableSpan`s and
// serializing them with `@opentelemetry/otlp-transformer` cost about 30 µs per traced request
// (two spans), more than the whole relay's work for it (docs/operations.md#what-tracing-costs):
// tracing every request would have cost +40 % CPU per request in the benchmark. Written here,
// the constant parts (the resource, the scope, every attribute key) are encoded once, and a span
// costs its variable bytes only. The tests decode what this writes with the OpenTelemetry
// project's own generated decoders (test/helpers/otlp-receiver.ts).
//
// Nested messages are length-delimited: each reserves five bytes for its length, and once it is
// written the length is put there in as few bytes as it needs and the message moved up to it.
import { SpanKind } from '@opentelemetry/api';
import type { RequestTrace } from './request-trace.js';
import { type SpanPlace, type SpanWriter, writeSpans } from './span-records.js';

const WIRE_VARINT = 0;
const WIRE_I64 = 1;
const WIRE_LEN = 2;
const WIRE_I32 = 5;
const tag = (field: number, wire: number): number => (field << 3) | wire;

// Fields of the OTLP messages written here.
const REQUEST_RESOURCE_SPANS = tag(1, WIRE_LEN);
const RESOURCE_SPANS_RESOURCE = tag(1, WIRE_LEN);
const RESOURCE_SPANS_SCOPE_SPANS = tag(2, WIRE_LEN);
const RESOURCE_ATTRIBUTES = tag(1, WIRE_LEN);
const SCOPE_SPANS_SCOPE = tag(1, WIRE_LEN);
const SCOPE_SPANS_SPANS = tag(2, WIRE_LEN);
const SCOPE_NAME = tag(1, WIRE_LEN);
const SCOPE_VERSION = tag(2, WIRE_LEN);
const SPAN_TRACE_ID = tag(1, WIRE_LEN);
const SPAN_SPAN_ID = tag(2, WIRE_LEN);
const SPAN_PARENT_SPAN_ID = tag(4, WIRE_LEN);
const SPAN_NAME = tag(5, WIRE_LEN);
const SPAN_KIND = tag(6, WIRE_VARINT);
const SPAN_START = tag(7, WIRE_I64);
const SPAN_END = tag(8, WIRE_I64);
const SPAN_ATTRIBUTES = tag(9, WIRE_LEN);
const SPAN_EVENTS = tag(11, WIRE_LEN);
const SPAN_STATUS = tag(15, WIRE_LEN);
const SPAN_FLAGS = tag(16, WIRE_I32);
const EVENT_TIME = tag(1, WIRE_I64);
const EVENT_NAME = tag(2, WIRE_LEN);
const EVENT_ATTRIBUTES = tag(3, WIRE_LEN);
const KEY_VALUE_KEY = tag(1, WIRE_LEN);
const KEY_VALUE_VALUE = tag(2, WIRE_LEN);
const ANY_STRING = tag(1, WIRE_LEN);
const ANY_BOOL = tag(2, WIRE_VARINT);
const ANY_INT = tag(3, WIRE_VARINT);
const ANY_DOUBLE = tag(4, WIRE_I64);
const STATUS_MESSAGE = tag(2, WIRE_LEN);
const STATUS_CODE = tag(3, WIRE_VARINT);
const STATUS_ERROR = 2;
/** Span flags: the sampled trace flag, and whether the parent is remote (HAS_IS_REMOTE, IS_REMOTE). */
const FLAGS_LOCAL_PARENT = 0x101;
const FLAGS_REMOTE_PARENT = 0x301;
/** OTLP numbers span kinds from 1 (the API from 0). */
const KIND: Record<SpanKind, number> = { [SpanKind.INTERNAL]: 1, [SpanKind.SERVER]: 2, [SpanKind.CLIENT]: 3, [SpanKind.PRODUCER]: 4, [SpanKind.CONSUMER]: 5 };

const RESERVED = 5;
const TWO_32 = 2 ** 32;

/** This thread's `performance.timeOrigin` in nanoseconds since the epoch, as two 32-bit halves. */
const ORIGIN_NS = BigInt(Math.round(performance.timeOrigin * 1e6));
const ORIGIN_LO = Number(ORIGIN_NS & 0xffffffffn);
const ORIGIN_HI = Number(ORIGIN_NS >> 32n);

/** The value of each lowercase hex digit by its code (ids are validated or generated as such). */
const NIBBLE = new Uint8Array(128);
for (let i = 0; i < 16; i++) NIBBLE['0123456789abcdef'.charCodeAt(i)] = i;

/** Writes one batch; one per thread, its buffer reused (it grows to the largest batch). */
export class OtlpProtobuf implements SpanWriter {
  private buf = Buffer.allocUnsafe(64 * 1024);
  /** The other buffer: the last batch's, left alone while the exporter may still send it. */
  private spare = Buffer.allocUnsafe(64 * 1024);
  private pos = 0;
  /** Where each open message's reserved length is, innermost last. */
  private readonly open: number[] = [];
  /** Each attribute key, encoded once as a KeyValue's key field. */
  private readonly keys = new Map<string, Buffer>();
  private readonly resource: Buffer;
  private readonly scope: Buffer;
  private flags = FLAGS_LOCAL_PARENT;

  constructor(
    private readonly place: SpanPlace,
    resource: Readonly<Record<string, string>>,
    scope: { name: string; version: string },
  ) {
    // The constant parts, encoded once with this writer itself.
    for (const [key, value] of Object.entries(resource)) {
      this.start(RESOURCE_ATTRIBUTES);
      this.keyValue(key, value);
      this.finish();
    }
    this.resource = Buffer.from(this.buf.subarray(0, this.pos));
    this.pos = 0;
    this.string(SCOPE_NAME, scope.name);
    this.string(SCOPE_VERSION, scope.version);
    this.scope = Buffer.from(this.buf.subarray(0, this.pos));
    this.pos = 0;
  }

  /**
   * The encoded request of `traces` (finished): a view of one of two buffers used in turn, so the
   * batch the exporter may still hold (one export is in flight at a time, span-export.ts) is never
   * the one written next.
   */
  encode(traces: readonly RequestTrace[]): Uint8Array {
    const other = this.spare;
    this.spare = this.buf;
    this.buf = other;
    this.pos = 0;
    this.open.length = 0;
    this.start(REQUEST_RESOURCE_SPANS);
    this.start(RESOURCE_SPANS_RESOURCE);
    this.raw(this.resource);
    this.finish();
    this.start(RESOURCE_SPANS_SCOPE_SPANS);
    this.start(SCOPE_SPANS_SCOPE);
    this.raw(this.scope);
    this.finish();
    for (const t of traces) writeSpans(t, this.place, this);
    this.finish();
    this.finish();
    return this.buf.subarray(0, this.pos);
  }

  // ── SpanWriter ───────────────────────────────────────────────────────────────────────────────

  begin(traceId: string, spanId: string, parentSpanId: string | undefined, remoteParent: boolean, name: string, kind: SpanKind, start: number, end: number): void {
    this.start(SCOPE_SPANS_SPANS);
    this.hex(SPAN_TRACE_ID, traceId, 16);
    this.hex(SPAN_SPAN_ID, spanId, 8);
    if (parentSpanId !== undefined) this.hex(SPAN_PARENT_SPAN_ID, parentSpanId, 8);
    this.string(SPAN_NAME, name);
    this.byte(SPAN_KIND);
    this.varint(KIND[kind]);
    this.time(SPAN_START, start);
    this.time(SPAN_END, Math.max(start, end));
    this.flags = remoteParent ? FLAGS_REMOTE_PARENT : FLAGS_LOCAL_PARENT;
  }

  attr(key: string, value: string | number | boolean): void {
    if (!this.shortAttr(key, value)) {
      this.start(SPAN_ATTRIBUTES);
      this.keyValue(key, value);
      this.finish();
    }
  }

  /**
   * Most attributes: a key, and a short ASCII string, a small integer or a boolean, whose lengths
   * are known before they are written (no reservation, nothing moved). False (nothing written) for
   * any other.
   */
  private shortAttr(key: string, value: string | number | boolean): boolean {
    const k = this.key(key);
    let anyLength: number;
    if (typeof value === 'string') {
      if (value.length > 100) return false;
      anyLength = 2 + value.length;
    } else if (typeof value === 'boolean') anyLength = 2;
    else if (Number.isInteger(value) && value >= 0 && value < 0x4000) anyLength = value < 0x80 ? 2 : 3;
    else return false;
    const length = k.length + 2 + anyLength;
    if (length >= 0x80) return false;
    this.room(2 + length);
    const buf = this.buf;
    const at = this.pos;
    let p = at;
    buf[p++] = SPAN_ATTRIBUTES;
    buf[p++] = length;
    for (let i = 0; i < k.length; i++) buf[p++] = k[i]!;
    buf[p++] = KEY_VALUE_VALUE;
    buf[p++] = anyLength;
    if (typeof value === 'string') {
      buf[p++] = ANY_STRING;
      buf[p++] = value.length;
      for (let i = 0; i < value.length; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) return false; // not ASCII: the general way (this.pos was not moved)
        buf[p++] = c;
      }
    } else if (typeof value === 'boolean') {
      buf[p++] = ANY_BOOL;
      buf[p++] = value ? 1 : 0;
    } else {
      buf[p++] = ANY_INT;
      if (value < 0x80) buf[p++] = value;
      else {
        buf[p++] = (value & 0x7f) | 0x80;
        buf[p++] = value >> 7;
      }
    }
    this.pos = p;
    return true;
  }

  /** A KeyValue's key field for `key`, encoded once. */
  private key(key: string): Buffer {
    let encoded = this.keys.get(key);
    if (encoded === undefined) {
      const bytes = Buffer.from(key, 'utf8');
      encoded = Buffer.concat([Buffer.from([KEY_VALUE_KEY, bytes.length]), bytes]);
      this.keys.set(key, encoded);
    }
    return encoded;
  }

  event(name: string, at: number, key?: string, value?: number): void {
    this.start(SPAN_EVENTS);
    this.time(EVENT_TIME, at);
    this.string(EVENT_NAME, name);
    if (key !== undefined) {
      this.start(EVENT_ATTRIBUTES);
      this.keyValue(key, value!);
      this.finish();
    }
    this.finish();
  }

  end(error: string | undefined): void {
    if (error !== undefined) {
      this.start(SPAN_STATUS);
      this.string(STATUS_MESSAGE, error);
      this.byte(STATUS_CODE);
      this.varint(STATUS_ERROR);
      this.finish();
    }
    this.varint(SPAN_FLAGS);
    this.room(4);
    this.buf.writeUInt32LE(this.flags, this.pos);
    this.pos += 4;
    this.finish();
  }

  // ── the wire format ──────────────────────────────────────────────────────────────────────────

  private keyValue(key: string, value: string | number | boolean): void {
    this.raw(this.key(key));
    this.start(KEY_VALUE_VALUE);
    if (typeof value === 'string') this.string(ANY_STRING, value);
    else if (typeof value === 'boolean') {
      this.byte(ANY_BOOL);
      this.varint(value ? 1 : 0);
    } else if (Number.isSafeInteger(value) && value >= 0) {
      this.byte(ANY_INT);
      this.varint(value);
    } else {
      this.byte(ANY_DOUBLE);
      this.room(8);
      this.buf.writeDoubleLE(value, this.pos);
      this.pos += 8;
    }
    this.finish();
  }

  /** A timestamp field: `performance.now()` of this thread as fixed64 nanoseconds since the epoch. */
  private time(field: number, now: number): void {
    this.byte(field);
    this.room(8);
    const ns = Math.round(now * 1e6);
    let lo = (ns % TWO_32) + ORIGIN_LO;
    let hi = Math.floor(ns / TWO_32) + ORIGIN_HI;
    if (lo >= TWO_32) {
      lo -= TWO_32;
      hi += 1;
    }
    this.buf.writeUInt32LE(lo, this.pos);
    this.buf.writeUInt32LE(hi, this.pos + 4);
    this.pos += 8;
  }

  private hex(field: number, id: string, bytes: number): void {
    this.byte(field);
    this.byte(bytes);
    this.room(bytes);
    const buf = this.buf;
    let at = this.pos;
    for (let i = 0; i < bytes * 2; i += 2) buf[at++] = (NIBBLE[id.charCodeAt(i) & 0x7f]! << 4) | NIBBLE[id.charCodeAt(i + 1) & 0x7f]!;
    this.pos = at;
  }

  private string(field: number, value: string): void {
    this.byte(field);
    // At most three bytes per UTF-16 unit: room for it after a length of up to five bytes.
    this.room(RESERVED + value.length * 3);
    const at = this.pos;
    const buf = this.buf;
    // Short ASCII (every key and most values) is copied here: a native write costs more than it.
    let p = at + RESERVED;
    const n = value.length;
    if (n <= 64) {
      for (let i = 0; i < n; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) {
          p = -1;
          break;
        }
        buf[p++] = c;
      }
    } else p = -1;
    const length = p < 0 ? buf.write(value, at + RESERVED, 'utf8') : n;
    this.pos = at + RESERVED;
    this.close(at, length);
  }

  private raw(bytes: Buffer): void {
    const n = bytes.length;
    this.room(n);
    const buf = this.buf;
    let at = this.pos;
    if (n > 64) bytes.copy(buf, at);
    else for (let i = 0; i < n; i++) buf[at + i] = bytes[i]!;
    at += n;
    this.pos = at;
  }

  /** A length-delimited field begins: its tag, and room for its length. */
  private start(field: number): void {
    this.varint(field);
    this.room(RESERVED);
    this.open.push(this.pos);
    this.pos += RESERVED;
  }

  private finish(): void {
    const at = this.open.pop()!;
    this.close(at, this.pos - at - RESERVED);
  }

  /** The field whose length is reserved at `at` holds `length` bytes after the reservation: its length written, it moved up. */
  private close(at: number, length: number): void {
    let size = 1;
    for (let v = length; v >= 0x80; v = Math.floor(v / 128)) size++;
    const body = at + RESERVED;
    if (size < RESERVED) {
      const buf = this.buf;
      const shift = RESERVED - size;
      if (length > 64) buf.copyWithin(at + size, body, body + length);
      else for (let i = body; i < body + length; i++) buf[i - shift] = buf[i]!;
    }
    this.pos = at;
    this.varint(length);
    this.pos = at + size + length;
  }

  private byte(value: number): void {
    this.room(1);
    this.buf[this.pos++] = value;
  }

  private varint(value: number): void {
    this.room(10);
    let v = value;
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }
}
