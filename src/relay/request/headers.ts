// Header policy, as pure functions: what Sluice reads from the caller and how its request is
// framed. What the replica receives is written by replica-request-head.ts; what the caller
// receives of the replica's headers (Content-Type and Content-Length only), by
// response-headers.ts. A caller's W3C `traceparent` and `tracestate` are forwarded as they came
// (or, for a traced request, with Sluice's span as the parent: src/tracing/), never through
// `forwardHeaders`. The caller's headers are read once, in the uWS handler, into a CallerHeaders
// record: the ones Sluice acts on (framing, Host, Authorization, `X-Sluice-Priority`,
// `X-Sluice-Max-Wait-Ms`, `X-Sluice-Keep-Alive`, the service's affinity header) and the ones it forwards. `X-Sluice-*` are never forwarded; the affinity header only when it is in
// `forwardHeaders`.
import type { HttpRequest } from 'uWebSockets.js';

/** What Sluice needs from the caller's headers, copied out of the uWS request. */
export interface CallerHeaders {
  authorization: string | undefined;
  authorizationCount: number;
  contentType: string | undefined;
  accept: string | undefined;
  contentLength: string | undefined;
  contentLengthCount: number;
  transferEncoding: string | undefined;
  transferEncodingCount: number;
  host: string | undefined;
  hostCount: number;
  /**
   * A header value holds DEL (the one control character uWS lets through), or a value Sluice
   * would forward (Content-Type, Accept, `forwardHeaders`) a byte outside visible ASCII.
   */
  controlInValue: boolean;
  /** Name/value pairs of the service's `forwardHeaders`, in arrival order. */
  forwarded: string[] | undefined;
  /** `X-Sluice-Priority` (the last one) and how many times it came. */
  priority: string | undefined;
  priorityCount: number;
  /** `X-Sluice-Max-Wait-Ms` (the last one) and how many times it came. */
  maxWait: string | undefined;
  maxWaitCount: number;
  /** `X-Sluice-Keep-Alive` (the last one) and how many times it came. */
  keepAlive: string | undefined;
  keepAliveCount: number;
  /** The service's affinity header (the first one), if it has one and the caller sent it. */
  affinity: string | undefined;
  /** W3C trace context (docs/api.md#what-the-replica-receives): repeated fields combined with a comma. */
  traceparent: string | undefined;
  tracestate: string | undefined;
}

// req.forEach calls back once per header; one module-level visitor (the handler is synchronous)
// avoids a closure per request.
let target: CallerHeaders;
let forwardNames: ReadonlySet<string>;
let affinityName: string;

function visit(name: string, value: string): void {
  if (value.indexOf('\x7f') >= 0) target.controlInValue = true;
  switch (name) {
    case 'authorization':
      target.authorization = value;
      target.authorizationCount += 1;
      return;
    case 'content-type':
      if (target.contentType === undefined) target.contentType = value;
      if (!forwardable(value)) target.controlInValue = true;
      return;
    case 'accept':
      // RFC 9110 section 5.3: repeated list fields combine with a comma.
      target.accept = target.accept === undefined ? value : `${target.accept}, ${value}`;
      if (!forwardable(value)) target.controlInValue = true;
      return;
    case 'host':
      target.host = value;
      target.hostCount += 1;
      return;
    case 'content-length':
      target.contentLength = value;
      target.contentLengthCount += 1;
      return;
    case 'transfer-encoding':
      target.transferEncoding = value;
      target.transferEncodingCount += 1;
      return;
    case 'x-sluice-priority':
      target.priority = value;
      target.priorityCount += 1;
      return;
    case 'x-sluice-max-wait-ms':
      target.maxWait = value;
      target.maxWaitCount += 1;
      return;
    case 'x-sluice-keep-alive':
      target.keepAlive = value;
      target.keepAliveCount += 1;
      return;
    case 'traceparent':
      target.traceparent = target.traceparent === undefined ? value : `${target.traceparent}, ${value}`;
      if (!forwardable(value)) target.controlInValue = true;
      return;
    case 'tracestate':
      target.tracestate = target.tracestate === undefined ? value : `${target.tracestate},${value}`;
      if (!forwardable(value)) target.controlInValue = true;
      return;
    default:
      if (name === affinityName && target.affinity === undefined) target.affinity = value;
      if (forwardNames.size !== 0 && forwardNames.has(name)) {
        (target.forwarded ??= []).push(name, value);
        if (!forwardable(value)) target.controlInValue = true;
      }
  }
}

/**
 * RFC 9110 section 5.5: a field value is visible characters, spaces and tabs, and obs-text.
 * uWS drops a request with most control characters in a value but lets DEL through, and hands
 * values over decoded as UTF-8 (an invalid byte becomes U+FFFD), so obs-text cannot be forwarded
 * byte for byte: a value Sluice forwards must be visible ASCII, spaces and tabs.
 */
function forwardable(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c >= 0x7f) return false;
  }
  return true;
}

/**
 * Reads the caller's headers (uWS gives names in lower case). `affinity` is the service's affinity
 * header ('' for none). Call inside the uWS handler.
 */
export function readCallerHeaders(req: HttpRequest, forward: ReadonlySet<string>, affinity = ''): CallerHeaders {
  target = {
    authorization: undefined,
    authorizationCount: 0,
    contentType: undefined,
    accept: undefined,
    contentLength: undefined,
    contentLengthCount: 0,
    transferEncoding: undefined,
    transferEncodingCount: 0,
    host: undefined,
    hostCount: 0,
    controlInValue: false,
    forwarded: undefined,
    priority: undefined,
    priorityCount: 0,
    maxWait: undefined,
    maxWaitCount: 0,
    keepAlive: undefined,
    keepAliveCount: 0,
    affinity: undefined,
    traceparent: undefined,
    tracestate: undefined,
  };
  forwardNames = forward;
  affinityName = affinity;
  req.forEach(visit);
  return target;
}

const DIGITS = /^[0-9]{1,15}$/;

/**
 * The request's framing, or why it is refused (RFC 9112 section 6.3: a message with both
 * Content-Length and Transfer-Encoding, several or invalid Content-Length values, or a transfer
 * coding Sluice does not decode cannot be framed safely).
 * Returns the body length in bytes, -1 for a chunked body, or a string naming the problem.
 */
export function requestFraming(h: CallerHeaders): number | string {
  if (h.transferEncodingCount > 0) {
    if (h.contentLengthCount > 0) return 'both Content-Length and Transfer-Encoding';
    if (h.transferEncodingCount > 1 || h.transferEncoding!.trim().toLowerCase() !== 'chunked') {
      return 'a transfer coding other than chunked';
    }
    return -1;
  }
  if (h.contentLengthCount === 0) return 0;
  if (h.contentLengthCount > 1) return 'duplicate Content-Length';
  if (!DIGITS.test(h.contentLength!)) return 'invalid Content-Length';
  return Number(h.contentLength);
}

/** RFC 9112 section 3.2 / RFC 3986 section 3.2.2: `uri-host [ ":" port ]`, or empty. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;

/**
 * What else makes the request malformed, beyond its framing: RFC 9112 section 3.2 requires a 400
 * for a request with several Host fields or an invalid one (uWS refuses a missing Host itself),
 * and a value Sluice would forward must not hold a control character.
 */
export function headerProblem(h: CallerHeaders): string | undefined {
  if (h.hostCount > 1) return 'duplicate Host';
  if (h.host !== undefined && !HOST.test(h.host)) return 'invalid Host';
  if (h.controlInValue) return 'a control character in a header value, or a forwarded value that is not visible ASCII';
  return undefined;
}

/** A signed decimal integer, as `X-Sluice-Priority` takes it. */
const SIGNED = /^[+-]?[0-9]+$/;
const UNSIGNED = /^[0-9]+$/;

/**
 * The request's priority: the token's, or lower as `X-Sluice-Priority` asks (a value above the
 * token's counts as the token's, one below `min` as `min`); a string naming the problem when the
 * header is not one integer.
 */
export function requestPriority(h: CallerHeaders, tokenPriority: number, min: number): number | string {
  if (h.priorityCount === 0) return tokenPriority;
  if (h.priorityCount > 1) return 'X-Sluice-Priority appears more than once';
  const value = h.priority!.trim();
  if (!SIGNED.test(value)) return 'X-Sluice-Priority must be an integer';
  const asked = Number(value);
  return asked >= tokenPriority ? tokenPriority : Math.max(min, asked);
}

/**
 * The request's own wait from `X-Sluice-Max-Wait-Ms` (ms, never above `max`), -1 without the
 * header; a string naming the problem when the header is not one integer ≥ 0.
 */
export function requestMaxWait(h: CallerHeaders, max: number): number | string {
  if (h.maxWaitCount === 0) return -1;
  if (h.maxWaitCount > 1) return 'X-Sluice-Max-Wait-Ms appears more than once';
  const value = h.maxWait!.trim();
  if (!UNSIGNED.test(value)) return 'X-Sluice-Max-Wait-Ms must be an integer ≥ 0 (milliseconds)';
  const asked = Number(value);
  return asked >= max ? -1 : asked;
}

/** A duration as `X-Sluice-Keep-Alive` takes it: digits, then `ms`, `s` (also none), `m` or `h`. */
const KEEP_ALIVE = /^([0-9]{1,10})(ms|s|m|h)?$/;
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * How long the request asks its replica to stay loaded after it (`X-Sluice-Keep-Alive`), in ms
 * (0 without the header; the service bounds it by `replicas.keepAliveMaxMs`); a string naming the
 * problem when the header is not one duration.
 */
export function requestKeepAlive(h: CallerHeaders): number | string {
  if (h.keepAliveCount === 0) return 0;
  if (h.keepAliveCount > 1) return 'X-Sluice-Keep-Alive appears more than once';
  const match = KEEP_ALIVE.exec(h.keepAlive!.trim());
  if (match === null) return 'X-Sluice-Keep-Alive must be a duration: an integer ≥ 0 of seconds, or with ms, s, m or h (30m)';
  return Number(match[1]) * UNIT_MS[match[2] ?? 's']!;
}
