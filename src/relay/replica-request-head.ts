// The replica's request head (docs/api.md#what-the-replica-receives), built once per attempt as one string: request
// line, `host`, `accept-encoding: identity`, `x-request-id`, the caller's Content-Type and Accept,
// the caller's `traceparent` and `tracestate` (a traced request's `traceparent` names Sluice's
// upstream span instead), the service's `forwardHeaders`, and the framing Sluice chose — `content-length` when the caller
// sent one (same value), `transfer-encoding: chunked` for a streamed chunked body, its length for
// a chunked body held whole, and `content-length: 0` for a POST, PUT or PATCH without one
// (RFC 9110 section 8.6: those methods anticipate content). Nothing else from the caller (no Authorization,
// Cookie, Connection or other hop-by-hop fields, RFC 9110 section 7.6.1).
// The header values come from uWS, which refuses CR and LF in them.
import type { CallerHeaders } from './request/headers.js';

/**
 * @param bodyLength from the caller's framing: bytes (0: no body), or -1 for a chunked body
 *   streamed as it comes; a chunked body held whole gives its length.
 * @param traceparent the caller's (`h.traceparent`), or a traced request's own; `tracestate` likewise.
 */
export function requestHead(method: string, target: string, host: string, h: CallerHeaders, bodyLength: number, requestId: string, traceparent: string | undefined, tracestate: string | undefined): string {
  let head = `${method} ${target} HTTP/1.1\r\nhost: ${host}\r\naccept-encoding: identity\r\nx-request-id: ${requestId}\r\n`;
  if (h.contentType !== undefined) head += `content-type: ${h.contentType}\r\n`;
  if (h.accept !== undefined) head += `accept: ${h.accept}\r\n`;
  if (traceparent !== undefined) head += `traceparent: ${traceparent}\r\n`;
  if (tracestate !== undefined) head += `tracestate: ${tracestate}\r\n`;
  if (bodyLength < 0) head += 'transfer-encoding: chunked\r\n';
  else if (h.contentLengthCount === 1) head += `content-length: ${h.contentLength!}\r\n`;
  else if (bodyLength > 0 || method === 'POST' || method === 'PUT' || method === 'PATCH') head += `content-length: ${bodyLength}\r\n`;
  const forwarded = h.forwarded;
  if (forwarded !== undefined) {
    for (let i = 0; i + 1 < forwarded.length; i += 2) head += `${forwarded[i]!}: ${forwarded[i + 1]!}\r\n`;
  }
  return head + '\r\n';
}
