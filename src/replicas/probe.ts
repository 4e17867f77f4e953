// Readiness and recovery probes: `GET readyPath` (2xx = ready) or, without a readyPath, a TCP
// connect. Probes go through their own undici Agent, never through the replica's relay pool, so a
// probe never waits behind relayed requests for one of `concurrency` connections (and a slow
// probe never holds one).
import { connect } from 'node:net';
import { Agent } from 'undici';

/** A probe's outcome: `ok`, plus what to log when it changes (`200`, `503`, `ECONNREFUSED`). */
export interface ProbeResult {
  ok: boolean;
  detail: string;
}

export function createProbeAgent(timeoutMs: number): Agent {
  return new Agent({
    connect: { timeout: timeoutMs },
    // A probe connection is reused while the replica keeps it open; one is enough per replica.
    connections: 1,
    pipelining: 1,
    keepAliveTimeout: 4_000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

/** `GET origin+path`; ok on any 2xx. Never throws. */
export async function probeHttp(agent: Agent, origin: string, path: string, timeoutMs: number): Promise<ProbeResult> {
  try {
    const res = await agent.request({
      origin,
      path,
      method: 'GET',
      headers: { 'accept-encoding': 'identity', 'user-agent': 'sluice-probe' },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    // The status decides; the body is read (and dropped) in the background so the connection can
    // be reused, without waiting for the stream's end (a few event-loop turns) to report ready.
    res.body.dump().catch(() => undefined);
    return { ok: res.statusCode >= 200 && res.statusCode < 300, detail: String(res.statusCode) };
  } catch (err) {
    return { ok: false, detail: errorCode(err) };
  }
}

/** Opens and closes a TCP connection; ok when it connects. Never throws. */
export function probeTcp(host: string, port: number, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let settled = false;
    const done = (result: ProbeResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => done({ ok: false, detail: 'ETIMEDOUT' }), timeoutMs);
    socket.once('connect', () => done({ ok: true, detail: 'connected' }));
    socket.once('error', (err) => done({ ok: false, detail: errorCode(err) }));
  });
}

function errorCode(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const cause = (err as { cause?: unknown }).cause;
    if (cause !== undefined && cause !== err) return errorCode(cause);
    if (err instanceof Error) return err.name;
  }
  return 'error';
}
