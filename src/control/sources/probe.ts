// Readiness and recovery probes: `GET readyPath` (2xx = ready) or, without a readyPath, a TCP
// connect. Probes go through their own node:http Agent, never through the replica's relay pool,
// so a probe never waits behind relayed requests for one of `concurrency` connections (and a slow
// probe never holds one). Probes are rare and off the hot path: a fresh connection each time
// (no keep-alive), and one timer per probe for its deadline.
import { Agent } from 'node:http';
import { connect } from 'node:net';
import { errorCode } from '../../http/error-code.js';
import { getWithDeadline } from '../../http/probe-client.js';

/** A probe's outcome: `ok`, plus what to log when it changes (`200`, `503`, `ECONNREFUSED`). */
export interface ProbeResult {
  ok: boolean;
  detail: string;
}

export function createProbeAgent(_timeoutMs: number): Agent {
  return new Agent({ keepAlive: false });
}

const HEADERS = { 'accept-encoding': 'identity', 'user-agent': 'sluice-probe' };

/** `GET origin+path`; ok on any 2xx within `timeoutMs` (connect included). Never throws. */
export function probeHttp(agent: Agent, origin: string, path: string, timeoutMs: number): Promise<ProbeResult> {
  return getWithDeadline<ProbeResult>(
    agent,
    origin + path,
    HEADERS,
    timeoutMs,
    (res, answer) => {
      // The status decides; the body is read (and dropped) in the background, within the same deadline.
      res.resume();
      const status = res.statusCode ?? 0;
      answer.settle({ ok: status >= 200 && status < 300, detail: String(status) });
    },
    (failure) => ({ ok: false, detail: failure.why === 'timeout' ? 'ETIMEDOUT' : failure.why === 'closed' ? 'closed' : failure.code }),
  );
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
