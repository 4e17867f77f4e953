// Scenario 3c, new streams: streams that each open a new connection, arriving at a steady rate,
// each living a few seconds at one token a second — what setting a stream up costs a relay (the
// caller's connection, the request, the upstream exchange, the access line), which the token
// scenarios, with their connections opened once, do not show. Raw-socket callers: one connection
// per stream, closed by the caller after the last chunk.
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Target } from './client.js';
import { cpuTimes } from './proc.js';
import { STREAM_PATH, STREAM_REQUEST } from './workload.js';

export interface NewStreamsRun {
  streams: number;
  /** Streams that ended cleanly with every token. */
  completed: number;
  tokens: number;
  /** The relay's CPU over the run (user + system, every thread) ÷ streams set up. */
  relayCpuUsPerStream: number | null;
  relayUserUsPerStream: number | null;
  relaySysUsPerStream: number | null;
  /** The same ÷ tokens delivered. */
  relayCpuUsPerToken: number | null;
}

/** One stream on a new connection: resolves with its tokens and whether it ended cleanly. */
function oneStream(target: Target, path: string): Promise<{ tokens: number; clean: boolean }> {
  const url = new URL(target.origin);
  const headers = Object.entries(target.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const body = STREAM_REQUEST;
  const request = `POST ${target.prefix}${path} HTTP/1.1\r\nhost: ${url.host}\r\n${headers}accept: text/event-stream\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
  return new Promise((resolve) => {
    let text = '';
    let clean = false;
    const socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true }, () => socket.write(request));
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.endsWith('\r\n0\r\n\r\n')) {
        clean = true;
        socket.end();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve({ tokens: text.split('"t":"').length - 1, clean: clean && text.startsWith('HTTP/1.1 200') }));
  });
}

/**
 * `streams` streams of `tokens` tokens, `gapMs` apart, started evenly over two streams' lives
 * (`2 × tokens × gapMs`): about half of them are open at once, and the second half starts as the
 * first ends, as in a service's steady state (a relay may reuse the upstream connections the
 * first half freed). The relay's CPU from before the first to after the last.
 */
export async function newStreams(target: Target, pid: number | undefined, streams: number, tokens: number, gapMs: number): Promise<NewStreamsRun> {
  const path = `${STREAM_PATH}?tokens=${tokens}&gap_ms=${gapMs}`;
  const spreadMs = 2 * tokens * gapMs;
  const cpu0 = pid === undefined ? undefined : cpuTimes(pid);
  const t0 = performance.now();
  const runs: Promise<{ tokens: number; clean: boolean }>[] = [];
  for (let i = 0; i < streams; i++) {
    const due = t0 + (i * spreadMs) / streams - performance.now();
    if (due > 1) await sleep(due);
    runs.push(oneStream(target, path));
  }
  const done = await Promise.all(runs);
  const cpu1 = pid === undefined ? undefined : cpuTimes(pid);
  let userS: number | undefined;
  let sysS: number | undefined;
  if (cpu0 !== undefined && cpu1 !== undefined) {
    userS = cpu1.user - cpu0.user;
    sysS = cpu1.system - cpu0.system;
    // The scheduler's nanosecond total when the kernel keeps it, split by the ticks' proportions.
    if (cpu0.onCpuS !== undefined && cpu1.onCpuS !== undefined) {
      const onCpu = cpu1.onCpuS - cpu0.onCpuS;
      const ticks = userS + sysS;
      userS = ticks > 0 ? (onCpu * userS) / ticks : onCpu / 2;
      sysS = onCpu - userS;
    }
  }
  const delivered = done.reduce((n, r) => n + r.tokens, 0);
  const per = (seconds: number | undefined, n: number): number | null => (seconds === undefined || n === 0 ? null : (seconds * 1e6) / n);
  return {
    streams,
    completed: done.filter((r) => r.clean && r.tokens === tokens).length,
    tokens: delivered,
    relayCpuUsPerStream: per(userS === undefined || sysS === undefined ? undefined : userS + sysS, streams),
    relayUserUsPerStream: per(userS, streams),
    relaySysUsPerStream: per(sysS, streams),
    relayCpuUsPerToken: per(userS === undefined || sysS === undefined ? undefined : userS + sysS, delivered),
  };
}
