// 64 MiB bodies both ways, with backpressure (docs/api.md#what-the-replica-receives, docs/api.md#what-the-caller-receives): every byte arrives
// unchanged, and the gateway's memory does not grow with the body.
//
// The replica, the gateway and the caller all run in this process, so what is measured is the
// whole process's growth; every party respects backpressure (the replica writes only when
// `res.write` returns true or on 'drain'; the slow side pulls at a fixed pace), so anything that
// grows with the body is the gateway holding it. Both are bounded: rss (uWS buffers a caller's
// bytes in native memory) and external (Buffers held in JavaScript). A relay that buffered a slow
// caller's answer would hold most of 64 MiB; the bound is 48 MiB. (Checked once by hand: with the
// downstream writer patched to ignore backpressure these cases fail, at 70-150 MiB of growth.)
//
// Noise: a warm-up transfer runs first, so what grows once per process (code, heap, allocator
// arenas) is not counted; and a relay that does not buffer still allocates a Buffer per chunk,
// which V8 may leave dead in tens of MiB before it collects them. That measures the garbage
// collector's laziness, not the relay, so when it can the sampler runs a full collection before
// each sample (every 50 ms): what remains is what something still holds.
import assert from 'node:assert/strict';
import { createCipheriv, createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent, request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually, sleep } from '../helpers/wait.js';

const MiB = 1024 * 1024;
const SIZE = 64 * MiB;
const CHUNK = 64 * 1024;
/** The slow caller reads at this pace: far below what the relay can do, so backpressure builds. */
const SLOW_READ_BYTES_PER_SECOND = 16 * MiB;
/** The slow replica reads uploads at this pace. */
const SLOW_UPLOAD_BYTES_PER_SECOND = 32 * MiB;
/** Growth of the process while a 64 MiB body crosses it; a buffering relay would exceed it. */
const MEMORY_BOUND = 48 * MiB;
/** The size of the warm-up transfers. */
const WARM_UP_SIZE = 8 * MiB;
/** Only a guard against hanging: each case takes a few seconds. */
const CASE_TIMEOUT_MS = 60_000;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as (() => void) | undefined;

/** Deterministic pseudo-random bytes (the AES-128-CTR keystream of `seed`), chunk by chunk. */
function* pseudoRandomChunks(seed: number, size = SIZE, chunkSize = CHUNK): Generator<Buffer> {
  const key = createHash('sha256').update(`sluice-large-bodies-${seed}`).digest().subarray(0, 16);
  const cipher = createCipheriv('aes-128-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(chunkSize);
  for (let left = size; left > 0; left -= chunkSize) {
    yield cipher.update(left >= chunkSize ? zeros : zeros.subarray(0, left));
  }
}

/** Sleeps when a reader is ahead of `bytesPerSecond`: the slow side of a transfer. */
class Pace {
  private readonly start = performance.now();
  constructor(private readonly bytesPerSecond: number) {}

  async after(totalBytes: number): Promise<void> {
    const due = this.start + (totalBytes / this.bytesPerSecond) * 1000;
    const ahead = due - performance.now();
    if (ahead >= 5) await sleep(ahead);
  }
}

interface Growth {
  rss: number;
  external: number;
  arrayBuffers: number;
}

/** Samples the process's memory every 50 ms (after a full GC when available); reports peak growth. */
class MemorySampler {
  private readonly base: NodeJS.MemoryUsage;
  private readonly peak: Growth;
  private readonly timer: NodeJS.Timeout;

  constructor() {
    gc?.();
    this.base = process.memoryUsage();
    this.peak = { rss: this.base.rss, external: this.base.external, arrayBuffers: this.base.arrayBuffers };
    this.timer = setInterval(() => this.sample(), 50);
  }

  private sample(): void {
    gc?.();
    const m = process.memoryUsage();
    this.peak.rss = Math.max(this.peak.rss, m.rss);
    this.peak.external = Math.max(this.peak.external, m.external);
    this.peak.arrayBuffers = Math.max(this.peak.arrayBuffers, m.arrayBuffers);
  }

  stop(): Growth {
    this.sample();
    clearInterval(this.timer);
    return {
      rss: this.peak.rss - this.base.rss,
      external: this.peak.external - this.base.external,
      arrayBuffers: this.peak.arrayBuffers - this.base.arrayBuffers,
    };
  }
}

function mib(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}

function report(what: string, growth: Growth): void {
  console.log(
    `${what}: peak growth rss ${mib(growth.rss)}, external ${mib(growth.external)} (of which arrayBuffers ${mib(growth.arrayBuffers)})` +
      `${gc === undefined ? ' [no forced GC]' : ' [GC forced before each sample]'}`,
  );
}

/** Resolves when `res` can take more bytes, or when its connection closed (then false). */
function drained(res: ServerResponse): Promise<boolean> {
  return new Promise((resolve) => {
    const onDrain = (): void => done(true);
    const onClose = (): void => done(false);
    const done = (ok: boolean): void => {
      res.off('drain', onDrain).off('close', onClose);
      resolve(ok);
    };
    res.on('drain', onDrain).on('close', onClose);
  });
}

interface Sent {
  sha256: string;
  bytes: number;
  /** How many bytes the caller had received when the replica's last byte left it. */
  callerBytesAtReplicaFinish: number;
}

interface Received {
  bytes: number;
  sha256: string;
  contentLength: string | undefined;
  transferEncoding: string | undefined;
}

describe('64 MiB bodies through the gateway', () => {
  let replica: TestReplica;
  let tg: TestGateway;
  let agent: Agent;
  /** What the replica sent for the download under way; set by the test before it asks. */
  let sending: { resolve: (sent: Sent) => void; seed: number; size: number } | undefined;
  /** Bytes the caller has received in the download under way. */
  let callerBytes = 0;

  /** The replica streams the pseudo-random bytes the test asked for, honouring backpressure. */
  async function download(req: IncomingMessage, res: ServerResponse, withLength: boolean): Promise<void> {
    req.resume();
    const target = sending!;
    res.writeHead(200, { 'content-type': 'application/octet-stream', ...(withLength ? { 'content-length': String(target.size) } : {}) });
    const hash = createHash('sha256');
    let bytes = 0;
    for (const chunk of pseudoRandomChunks(target.seed, target.size)) {
      hash.update(chunk);
      bytes += chunk.length;
      if (!res.write(chunk) && !(await drained(res))) return; // the connection closed: the caller sees a short body
    }
    res.end(() => target.resolve({ sha256: hash.digest('hex'), bytes, callerBytesAtReplicaFinish: callerBytes }));
  }

  /** The replica reads an upload at the slow pace and answers its size, SHA-256 and framing. */
  async function upload(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const hash = createHash('sha256');
    const pace = new Pace(SLOW_UPLOAD_BYTES_PER_SECOND);
    let bytes = 0;
    for await (const chunk of req) {
      hash.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
      await pace.after(bytes);
    }
    const body: Received = {
      bytes,
      sha256: hash.digest('hex'),
      contentLength: req.headers['content-length'],
      transferEncoding: req.headers['transfer-encoding'],
    };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  before(async () => {
    replica = await startReplica(async (req, res) => {
      if (req.url === '/download/with-length') await download(req, res, true);
      else if (req.url === '/download/chunked') await download(req, res, false);
      else if (req.url === '/upload') await upload(req, res);
      else {
        res.writeHead(404);
        res.end();
      }
    });
    // workers: 1: the sampler's full collection (global.gc) reaches this thread's heap only; a
    // worker thread's heap holds its dead chunk Buffers until its own collector runs, and the
    // warm-up would warm one worker while the measured transfer may reach another.
    tg = await startTestGateway(rawService({ urls: [replica.url] }), { workers: 1 });
    agent = new Agent();
    await warmUp();
  });

  /**
   * One small transfer each way at full speed before anything is measured, so that what loads or
   * grows once per process (code, JIT, heap and allocator arenas) is not counted as growth.
   */
  async function warmUp(): Promise<void> {
    for (const path of ['/download/with-length', '/download/chunked']) {
      const sent = new Promise<Sent>((resolve) => {
        sending = { resolve, seed: 0, size: WARM_UP_SIZE };
      });
      const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body: '{}', dispatcher: agent });
      for await (const chunk of res.body) void chunk;
      await sent;
    }
    const res = await request(tg.url('/upload'), {
      method: 'POST',
      headers: { ...AUTH, 'content-length': String(WARM_UP_SIZE) },
      body: Readable.from(pseudoRandomChunks(0, WARM_UP_SIZE)),
      dispatcher: agent,
    });
    await res.body.text();
  }

  after(async () => {
    await agent?.close();
    await tg?.close();
    await replica?.close();
  });

  async function accessLog(requestId: string): Promise<Record<string, unknown>> {
    const find = () => tg.logs.find((l) => l['reqId'] === requestId && l['msg'] === 'request');
    await eventually(() => find() !== undefined, 10_000, `the access log line of ${requestId}`);
    return find()!;
  }

  for (const [label, path, withLength] of [
    ['with Content-Length', '/download/with-length', true],
    ['chunked (no Content-Length)', '/download/chunked', false],
  ] as const) {
    test(`a 64 MiB answer ${label}, read slowly, arrives byte-identical and the gateway does not buffer it`, { timeout: CASE_TIMEOUT_MS }, async () => {
      const sent = new Promise<Sent>((resolve) => {
        sending = { resolve, seed: withLength ? 1 : 2, size: SIZE };
      });
      callerBytes = 0;
      const memory = new MemorySampler();
      const started = performance.now();
      const res = await request(tg.url(path), { method: 'POST', headers: AUTH, body: '{}', dispatcher: agent });
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['content-type'], 'application/octet-stream');
      if (withLength) {
        assert.equal(res.headers['content-length'], String(SIZE));
      } else {
        assert.equal(res.headers['content-length'], undefined);
        assert.equal(res.headers['transfer-encoding'], 'chunked');
      }
      const hash = createHash('sha256');
      const pace = new Pace(SLOW_READ_BYTES_PER_SECOND);
      for await (const chunk of res.body) {
        hash.update(chunk as Buffer);
        callerBytes += (chunk as Buffer).length;
        await pace.after(callerBytes);
      }
      const growth = memory.stop();
      const seconds = (performance.now() - started) / 1000;
      const replicaSent = await sent;

      assert.equal(callerBytes, SIZE);
      assert.equal(replicaSent.bytes, SIZE);
      assert.equal(hash.digest('hex'), replicaSent.sha256, 'the caller got exactly the bytes the replica sent');
      report(`download ${label} (${seconds.toFixed(1)} s)`, growth);
      console.log(
        `download ${label}: when the replica wrote its last byte the caller had ${mib(replicaSent.callerBytesAtReplicaFinish)}; ` +
          `${mib(SIZE - replicaSent.callerBytesAtReplicaFinish)} were in socket buffers and the gateway`,
      );
      assert.ok(growth.rss < MEMORY_BOUND, `rss grew by ${mib(growth.rss)} (bound ${mib(MEMORY_BOUND)})`);
      assert.ok(growth.external < MEMORY_BOUND, `external memory grew by ${mib(growth.external)} (bound ${mib(MEMORY_BOUND)})`);

      const line = await accessLog(String(res.headers['x-request-id']));
      assert.equal(line['status'], 200);
      assert.equal(line['outcome'], 'ok');
      assert.equal(line['bytesOut'], SIZE);
    });
  }

  for (const [label, withLength] of [
    ['with Content-Length', true],
    ['chunked', false],
  ] as const) {
    test(`a 64 MiB upload ${label}, read slowly by the replica, arrives byte-identical and the gateway does not buffer it`, { timeout: CASE_TIMEOUT_MS }, async () => {
      const hash = createHash('sha256');
      let bytes = 0;
      const seed = withLength ? 3 : 4;
      const body = Readable.from(
        (function* () {
          for (const chunk of pseudoRandomChunks(seed)) {
            hash.update(chunk);
            bytes += chunk.length;
            yield chunk;
          }
        })(),
      );
      const headers: Record<string, string> = { ...AUTH, 'content-type': 'application/octet-stream' };
      if (withLength) headers['content-length'] = String(SIZE);
      const memory = new MemorySampler();
      const started = performance.now();
      const res = await request(tg.url('/upload'), { method: 'POST', headers, body, dispatcher: agent });
      const text = await res.body.text();
      const growth = memory.stop();
      const seconds = (performance.now() - started) / 1000;
      assert.equal(res.statusCode, 200, text);
      const received = JSON.parse(text) as Received;

      assert.equal(bytes, SIZE);
      assert.equal(received.bytes, SIZE);
      assert.equal(received.sha256, hash.digest('hex'), 'the replica got exactly the bytes the caller sent');
      // What the replica receives (docs/api.md#what-the-replica-receives): Content-Length when the caller sent one (same value), else chunked.
      if (withLength) {
        assert.equal(received.contentLength, String(SIZE));
        assert.equal(received.transferEncoding, undefined);
      } else {
        assert.equal(received.contentLength, undefined);
        assert.equal(received.transferEncoding, 'chunked');
      }
      report(`upload ${label} (${seconds.toFixed(1)} s)`, growth);
      assert.ok(growth.rss < MEMORY_BOUND, `rss grew by ${mib(growth.rss)} (bound ${mib(MEMORY_BOUND)})`);
      assert.ok(growth.external < MEMORY_BOUND, `external memory grew by ${mib(growth.external)} (bound ${mib(MEMORY_BOUND)})`);

      const line = await accessLog(String(res.headers['x-request-id']));
      assert.equal(line['status'], 200);
      assert.equal(line['bytesIn'], SIZE);
    });
  }
});
