// A WebSocket client for the realtime session tests (the `ws` package): every message kept, the
// close it got, or the HTTP answer that refused its handshake.
import { WebSocket } from 'ws';
import { AUTH } from './gateway.js';

/**
 * The todo of a test that a known fault of the uWebSockets.js build can fail: a session upgraded
 * after a wait is now and then closed without a close frame right after its 101 (uWebSockets'
 * cork() on an asynchronously upgraded WebSocket, fixed upstream, not yet in a published build).
 */
export const UWS_ASYNC_UPGRADE_CLOSE = 'the uWebSockets.js build closes an asynchronously upgraded session right after its 101 now and then (fixed upstream, not yet published)';

export interface Client {
  ws: WebSocket;
  messages: { data: Buffer; binary: boolean }[];
  closed: Promise<{ code: number; reason: string }>;
}

/** A `ws` client that keeps every message; resolves once open, or with the HTTP status it was refused with. */
export function connect(url: string, options: { protocols?: string[]; headers?: Record<string, string> } = {}): Promise<Client | { status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), options.protocols ?? [], { headers: options.headers ?? {}, perMessageDeflate: false });
    const messages: Client['messages'] = [];
    const closed = new Promise<{ code: number; reason: string }>((res) => ws.on('close', (code, reason) => res({ code, reason: reason.toString() })));
    ws.on('message', (data: Buffer, binary: boolean) => messages.push({ data, binary }));
    ws.on('open', () => resolve({ ws, messages, closed }));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    ws.on('error', reject);
  });
}

/** An authenticated session (Authorization unless `headers` says otherwise), open. */
export async function open(url: string, options: { protocols?: string[]; headers?: Record<string, string> } = {}): Promise<Client> {
  const c = await connect(url, { headers: AUTH, ...options });
  if (!('ws' in c)) throw new Error(`refused: ${c.status} ${c.body}`);
  return c;
}

