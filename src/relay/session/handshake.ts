// The caller's WebSocket opening handshake (RFC 6455 section 4.2.1) as Sluice reads it, copied out
// of the uWS request in the upgrade handler: the key, the version, the subprotocols it offers, and
// the API key a browser client puts in a subprotocol (`openai-insecure-api-key.<key>`, as OpenAI's
// Realtime API takes it from browsers, which cannot set an Authorization header). That key is
// taken out of the list: the replica gets the other subprotocols, never the key.
import type { HttpRequest } from 'uWebSockets.js';
import { TOKEN } from '../../http/syntax.js';

/** The subprotocol that carries an API key, followed by the key. */
const INSECURE_KEY_PROTOCOL = 'openai-insecure-api-key.';

/** What a session's handshake says, once it is sound. */
export interface Handshake {
  /** `Sec-WebSocket-Key`, for uWS's accept value. */
  readonly key: string;
  /** The subprotocols the caller offers, in its order, without the API key. */
  readonly protocols: string[];
  /** The API key of an `openai-insecure-api-key.` subprotocol, as an Authorization value (`Bearer <key>`). */
  readonly authorization: string | undefined;
}

/** RFC 6455 section 4.1: the key is 16 random bytes in base64, 24 characters. */
const KEY = /^[A-Za-z0-9+/]{22}==$/;

/**
 * The handshake of a request uWS routed to the WebSocket route (it had a 24-character
 * `Sec-WebSocket-Key`), or what makes it unsound: the key, `Sec-WebSocket-Version: 13`,
 * `Connection: upgrade`, the subprotocol list (tokens, at most one API key). Call inside the uWS
 * handler. `undefined` when the request does not ask for a WebSocket at all (no `Upgrade: websocket`).
 */
export function readHandshake(req: HttpRequest): Handshake | string | undefined {
  if (!hasToken(req.getHeader('upgrade'), 'websocket')) return undefined;
  if (!hasToken(req.getHeader('connection'), 'upgrade')) return 'Connection must name "upgrade"';
  const key = req.getHeader('sec-websocket-key');
  if (!KEY.test(key)) return 'Sec-WebSocket-Key must be 16 bytes in base64';
  if (req.getHeader('sec-websocket-version') !== '13') return 'Sec-WebSocket-Version must be 13';
  let offered = '';
  req.forEach((name, value) => {
    if (name === 'sec-websocket-protocol') offered = offered === '' ? value : `${offered},${value}`;
  });
  const protocols: string[] = [];
  let authorization: string | undefined;
  if (offered.trim() === '') return { key, protocols, authorization };
  for (const item of offered.split(',')) {
    const protocol = item.trim();
    if (!TOKEN.test(protocol)) return 'Sec-WebSocket-Protocol must be a list of tokens';
    if (protocol.startsWith(INSECURE_KEY_PROTOCOL)) {
      if (authorization !== undefined) return `more than one ${INSECURE_KEY_PROTOCOL} subprotocol`;
      authorization = `Bearer ${protocol.slice(INSECURE_KEY_PROTOCOL.length)}`;
    } else if (!protocols.includes(protocol)) protocols.push(protocol);
  }
  return { key, protocols, authorization };
}

/** A comma-separated header value holds `token`, case-insensitively (RFC 9110 section 7.8). */
function hasToken(value: string, token: string): boolean {
  if (value === '') return false;
  for (const item of value.split(',')) if (item.trim().toLowerCase() === token) return true;
  return false;
}

/** A request that reached the HTTP route asks for a WebSocket (its handshake is unsound: no valid key). */
export function asksForWebSocket(req: HttpRequest): boolean {
  return hasToken(req.getHeader('upgrade'), 'websocket');
}
