// The chunked-upload scenarios (docs/configuration.md#chunked-uploads), on raw sockets so the
// framing is exactly what is measured:
//   uploads      the same 1 KiB JSON request, sequential on one keep-alive connection, framed three
//                ways: `length` (Content-Length, head and body in one write), `chunked` (one chunk
//                and the last-chunk, written with the head: the body arrives whole) and
//                `chunked-pieces` (head, then four 256-byte chunks and the last-chunk, each its own
//                write, no Nagle: a body that arrives in pieces, as a client streaming a body
//                sends it). Per framing: TTFB (first byte written → first byte of the answer)
//                p50/p99 of sequential requests on one connection, and the relay's CPU per request
//                under load: the same requests on `connections` connections at once (as the
//                throughput scenario's autocannon, which cannot send chunked bodies). Sluice holds
//                both chunked framings and sends them with Content-Length; `chunked − length` is
//                what that costs.
//   heldUploads  `heldCallers` connections at once, each sending the head and `heldBytes` of a
//                chunked body, never its end: the relay's RSS growth (peak − before) while they
//                are open. Sluice holds each up to its bound, within the service's account.
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Target } from './client.js';
import type { Peer } from './peers.js';
import { cpuTimes, statusMiB } from './proc.js';
import { percentile } from './stats.js';
import { INFER_PATH, INFER_REQUEST } from './workload.js';

export const FRAMINGS = ['length', 'chunked', 'chunked-pieces'] as const;
export type Framing = (typeof FRAMINGS)[number];

export interface UploadRun {
  requests: number;
  ttfbP50Us: number;
  ttfbP99Us: number;
  /** Under load (`connections` at once): relay CPU (user + system) ÷ requests, µs; null for `direct`. */
  relayCpuUsPerReq: number | null;
  /** Under load: requests per second. */
  reqPerS: number;
}

export interface HeldUploadsRun {
  callers: number;
  bytesEach: number;
  /** Body bytes the callers had handed to their sockets when RSS peaked (all of them, unless the relay held back). */
  bytesWritten: number;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  growthMiB: number;
}

function open(target: Target): Promise<Socket> {
  const url = new URL(target.origin);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port), noDelay: true });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

function head(target: Target, framing: 'length' | 'chunked', bodyBytes: number): string {
  const headers = Object.entries(target.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const frame = framing === 'length' ? `content-length: ${bodyBytes}` : 'transfer-encoding: chunked';
  return `POST ${target.prefix}${INFER_PATH} HTTP/1.1\r\nhost: ${new URL(target.origin).host}\r\n${headers}content-type: application/json\r\n${frame}\r\n\r\n`;
}

const chunk = (body: string): string => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n`;

/** The writes of one request, in order. */
function writes(target: Target, framing: Framing): Buffer[] {
  const body = INFER_REQUEST;
  if (framing === 'length') return [Buffer.from(head(target, 'length', Buffer.byteLength(body)) + body)];
  if (framing === 'chunked') return [Buffer.from(`${head(target, 'chunked', 0)}${chunk(body)}0\r\n\r\n`)];
  const quarter = Math.ceil(body.length / 4);
  const pieces = [0, 1, 2, 3].map((i) => chunk(body.slice(i * quarter, (i + 1) * quarter)));
  return [Buffer.from(head(target, 'chunked', 0)), ...pieces.map((p) => Buffer.from(p)), Buffer.from('0\r\n\r\n')];
}

/** Resolves with the time of the answer's first byte once the whole answer (Content-Length or chunked) is in. */
class Answers {
  private buffer: Buffer = Buffer.alloc(0);
  private firstAt = 0n;
  private waiter: ((firstAt: bigint) => void) | undefined;

  constructor(socket: Socket) {
    socket.on('data', (b: Buffer) => {
      if (this.firstAt === 0n) this.firstAt = process.hrtime.bigint();
      this.buffer = this.buffer.length === 0 ? b : Buffer.concat([this.buffer, b]);
      this.check();
    });
  }

  next(): Promise<bigint> {
    return new Promise((resolve) => {
      this.waiter = resolve;
      this.check();
    });
  }

  private check(): void {
    if (this.waiter === undefined) return;
    const text = this.buffer.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    if (end < 0) return;
    if (!text.startsWith('HTTP/1.1 200')) throw new Error(`upload answered ${text.slice(0, text.indexOf('\r\n'))}`);
    const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
    let size: number;
    if (length !== null) size = end + 4 + Number(length[1]);
    else {
      const last = text.indexOf('\r\n0\r\n\r\n', end);
      if (last < 0) return;
      size = last + 7;
    }
    if (this.buffer.length < size) return;
    this.buffer = this.buffer.subarray(size);
    const firstAt = this.firstAt;
    this.firstAt = this.buffer.length > 0 ? process.hrtime.bigint() : 0n;
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter(firstAt);
  }
}

/** One keep-alive connection sending uploads framed as `framing`, one at a time. */
async function uploader(peer: Peer, framing: Framing): Promise<{ one: () => Promise<number>; close: () => void }> {
  const socket = await open(peer.target);
  const answers = new Answers(socket);
  const parts = writes(peer.target, framing);
  const one = async (): Promise<number> => {
    const t0 = process.hrtime.bigint();
    for (const part of parts) socket.write(part);
    const first = await answers.next();
    return Number(first - t0) / 1000;
  };
  return { one, close: () => socket.destroy() };
}

/**
 * `requests` uploads framed as `framing`: one after another on one connection for the TTFB (a few
 * warm-ups first), then as many again on `connections` connections at once for the CPU.
 */
export async function uploads(peer: Peer, framing: Framing, requests: number, connections: number): Promise<UploadRun> {
  const single = await uploader(peer, framing);
  const samples: number[] = [];
  try {
    for (let i = 0; i < 20; i++) await single.one();
    for (let i = 0; i < requests; i++) samples.push(await single.one());
  } finally {
    single.close();
  }
  const many = await Promise.all(Array.from({ length: connections }, () => uploader(peer, framing)));
  try {
    await Promise.all(many.map(async (u) => {
      for (let i = 0; i < 5; i++) await u.one();
    }));
    const pid = peer.relay?.pid;
    const cpu0 = pid === undefined ? undefined : cpuTimes(pid);
    const t0 = performance.now();
    let left = requests;
    await Promise.all(many.map(async (u) => {
      while (left > 0) {
        left -= 1;
        await u.one();
      }
    }));
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = pid === undefined ? undefined : cpuTimes(pid);
    const cpuS = cpu0 === undefined || cpu1 === undefined ? undefined : cpu1.user - cpu0.user + (cpu1.system - cpu0.system);
    return {
      requests,
      ttfbP50Us: percentile(samples, 50),
      ttfbP99Us: percentile(samples, 99),
      relayCpuUsPerReq: cpuS === undefined ? null : (cpuS * 1e6) / requests,
      reqPerS: requests / seconds,
    };
  } finally {
    for (const u of many) u.close();
  }
}

const rss = (pid: number): number => statusMiB(pid, 'VmRSS') ?? Number.NaN;

/**
 * `callers` connections, each with the head and `bytesEach` of a chunked body (64 KiB chunks), never
 * the end; RSS sampled every 100 ms until every caller's bytes are handed to the kernel and RSS has
 * not grown for a second (or 60 s passed), then every connection is closed.
 */
export async function heldUploads(peer: Peer, callers: number, bytesEach: number): Promise<HeldUploadsRun> {
  const pid = peer.relay!.pid;
  await sleep(200);
  const before = rss(pid);
  let peak = before;
  let peakAt = performance.now();
  let written = 0;
  let writtenAtPeak = 0;
  const sample = (): void => {
    const now = rss(pid);
    if (now > peak) {
      peak = now;
      peakAt = performance.now();
      writtenAtPeak = written;
    }
  };
  const timer = setInterval(sample, 100);
  const sockets: Socket[] = [];
  const piece = Buffer.from(chunk('x'.repeat(64 * 1024)), 'latin1');
  try {
    for (let i = 0; i < callers; i++) {
      const socket = await open(peer.target);
      socket.on('error', () => undefined);
      sockets.push(socket);
      socket.write(head(peer.target, 'chunked', 0));
      for (let sent = 0; sent < bytesEach; sent += 64 * 1024) {
        socket.write(piece, () => {
          written += 64 * 1024;
        });
      }
    }
    const deadline = performance.now() + 60_000;
    const total = callers * Math.ceil(bytesEach / (64 * 1024)) * 64 * 1024;
    while (performance.now() < deadline && (written < total || performance.now() - peakAt < 1_000)) await sleep(100);
    sample();
    return { callers, bytesEach, bytesWritten: writtenAtPeak, rssBeforeMiB: before, rssPeakMiB: peak, growthMiB: peak - before };
  } finally {
    clearInterval(timer);
    for (const socket of sockets) socket.destroy();
    await sleep(500);
  }
}
