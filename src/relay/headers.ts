// Header policy, as pure functions: what Sluice reads from the caller and how its request is
// framed. What the replica receives (contract section 3) is written by src/upstream/request-head.ts;
// what the caller receives of the replica's headers (contract section 4: Content-Type and
// Content-Length only) is picked by the response parser (src/upstream/response-parser.ts).
// The caller's headers are read once, in the uWS handler, into a CallerHeaders record.
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
}

// req.forEach calls back once per header; one module-level visitor (the handler is synchronous)
// avoids a closure per request.
let target: CallerHeaders;
let forwardNames: ReadonlySet<string>;

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
    default:
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

/** Reads the caller's headers (uWS gives names in lower case). Call inside the uWS handler. */
export function readCallerHeaders(req: HttpRequest, forward: ReadonlySet<string>): CallerHeaders {
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
  };
  forwardNames = forward;
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
