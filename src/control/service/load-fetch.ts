// One replica's readings of its Prometheus endpoint (docs/configuration.md#the-model-servers-own-queue),
// on a raw kept-alive socket read by Sluice's own strict response parser (src/upstream/
// response-parser.ts, docs/architecture.md#fact-13), not node:http: four readings a second never
// get node:http's client machinery out of V8's baseline tier, and it made garbage per reading
// (docs/architecture.md, the slot table's load readings).
//
// - One `ExpositionRead` per replica, reused for every reading: no request object, closure,
//   promise or timer per reading (a connection's listeners are made once per connection).
// - One connection, kept alive between readings: reused while the replica allows it (no
//   `Connection: close`, no bytes beyond the answer) and for at most UPSTREAM_KEEP_ALIVE_MS (or the
//   replica's `Keep-Alive: timeout` hint less UPSTREAM_KEEP_ALIVE_MARGIN_MS) after the last
//   reading began; a connection the replica closed while idle is noticed and the next reading
//   reconnects. Not the upstream pool: its idle deadline would run the 100 ms deadline clock
//   (time/ticker.ts) on the main thread for good, and a timer's wake-up costs about as much as
//   a reading here.
// - At most LOAD_READ_MAX_BYTES (1 MiB) of a body is read. A larger one fails the reading with
//   `larger than 1048576 bytes`: at once when its Content-Length says so, else when the byte past
//   the limit arrives; the connection is dropped then and nothing more of it is read. A partial
//   exposition is not a reading: the series beyond the limit would be missing from the sums.
// - Each piece of the body is scanned in the read that delivered it; nothing of the body is kept
//   but what the scanner carries (at most one short line).
// - The deadline, `timeoutMs` for the whole reading, is checked at the reader's interval
//   (`overdue`: no timer), and a reading that completes after it fails all the same.
// - A failure is a problem string (`status 500`, `ECONNREFUSED`, `no answer within 500 ms`,
//   `closed`, `malformed response: …`) for the log and /status; each reading ends in exactly one
//   `readingDone`.
import { connect, type Socket } from 'node:net';
import { errorCode } from '../../http/error-code.js';
import { hostAndPort } from '../../http/syntax.js';
import { PARSE_DONE, PARSE_ERROR, ResponseParser, type ResponseSink } from '../../http/response-parser.js';
import { UPSTREAM_KEEP_ALIVE_MARGIN_MS, UPSTREAM_KEEP_ALIVE_MS } from '../../tunables.js';

import type { MetricScanner } from './metric-scanner.js';
import type { ManagedReplica } from './replica.js';

/**
 * An exposition larger than this fails the reading: its body is read no further and its socket is
 * destroyed (vLLM's, histograms included, is well under 1 MiB). docs/configuration.md#the-model-servers-own-queue
 */
const LOAD_READ_MAX_BYTES = 1024 * 1024;

const TOO_LARGE = `larger than ${LOAD_READ_MAX_BYTES} bytes`;

/** The read buffer shared by every load reading's socket (one thread reads them all). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** Where a reading ends: `problem` undefined, the scanner has the whole exposition. */
export interface ReadingSink {
  readingDone(read: ExpositionRead, problem: string | undefined): void;
}

/** The readings of one replica's endpoint `origin + path`, one at a time. */
export class ExpositionRead implements ResponseSink {
  private readonly host: string;
  private readonly port: number;
  private readonly head: string;
  /** The problem of a reading that missed its deadline. */
  private readonly late: string;
  private readonly parser = new ResponseParser(this);
  /** The connection (undefined: none; the next reading connects). */
  private socket: Socket | undefined = undefined;
  /** How long after its last reading began the connection may be reused, in ms. */
  private keepMs = 0;
  /** A reading is under way (between `start` and `readingDone`). */
  private active = false;
  /** The body bytes of the reading under way. */
  private bytes = 0;
  /** performance.now() when the reading under way (or the last one) began. */
  startedAt = 0;

  constructor(
    private readonly sink: ReadingSink,
    readonly replica: ManagedReplica,
    readonly origin: string,
    path: string,
    private readonly scanner: MetricScanner,
    private readonly timeoutMs: number,
  ) {
    const url = new URL(origin);
    ({ host: this.host, port: this.port } = hostAndPort(url));
    this.head = `GET ${path} HTTP/1.1\r\nhost: ${url.host}\r\naccept: text/plain;version=0.0.4, */*;q=0.1\r\naccept-encoding: identity\r\nuser-agent: sluice-load\r\n\r\n`;
    this.late = `no answer within ${timeoutMs} ms`;
  }

  /** A reading is under way. */
  get reading(): boolean {
    return this.active;
  }

  /** Starts a reading (none may be under way) at `now` (performance.now()): the scanner is reset, the request written. */
  start(now: number): void {
    // Idle longer than the replica keeps a connection: it may be closing it as the request goes out.
    if (this.socket !== undefined && now - this.startedAt > this.keepMs) this.drop();
    this.active = true;
    this.startedAt = now;
    this.bytes = 0;
    this.scanner.reset();
    if (this.socket === undefined) {
      try {
        this.connect();
      } catch (err) {
        // A synchronous failure (a port net.connect refuses): a failed reading like any other.
        this.done(errorCode(err));
        return;
      }
    }
    this.parser.reset(true);
    // Before the connect completes, net.Socket holds the write for it.
    this.socket!.write(this.head, 'latin1');
  }

  /** Cuts the reading under way if it has run past its deadline at `now` (the reader's interval). */
  overdue(now: number): void {
    if (this.active && now - this.startedAt > this.timeoutMs) this.stop(this.late);
  }

  /** Closes the connection; a reading under way ends with `closed`. */
  close(): void {
    this.stop('closed');
    this.drop();
  }

  // ── the connection ─────────────────────────────────────────────────────────────────────────

  /** A new connection; its listeners, made once for it, ignore it once it is not the current one. */
  private connect(): void {
    const socket = connect({ host: this.host, port: this.port, noDelay: true, onread: { buffer: READ_BUFFER, callback: (n: number): boolean => this.onRead(socket, n) } });
    socket.on('error', (err: Error) => this.lost(socket, errorCode(err)));
    socket.on('end', () => this.onEnd(socket));
    socket.on('close', () => this.lost(socket, 'closed'));
    // An idle connection does not keep the process alive (the reader's interval does not either).
    socket.unref();
    this.socket = socket;
  }

  /** Closes the connection, if any; nothing more of it is read. */
  private drop(): void {
    const socket = this.socket;
    if (socket === undefined) return;
    this.socket = undefined;
    this.parser.stop();
    socket.destroy();
  }

  private onRead(socket: Socket, n: number): boolean {
    if (socket !== this.socket) return false;
    if (!this.active) {
      // Bytes nobody asked for, on an idle connection: never reuse it.
      this.drop();
      return false;
    }
    const result = this.parser.execute(READ_BUFFER, 0, n);
    if (result === PARSE_ERROR) this.stop(`malformed response: ${this.parser.error}`);
    else if (result === PARSE_DONE) this.complete(this.parser.offset < n);
    return socket === this.socket;
  }

  /** The replica sent FIN: a body delimited by the close is complete; anything else is cut short. */
  private onEnd(socket: Socket): void {
    if (socket !== this.socket) return;
    if (this.active && this.parser.finish() === PARSE_DONE) this.complete(true);
    else this.lost(socket, 'closed');
  }

  private lost(socket: Socket, problem: string): void {
    if (socket !== this.socket) return;
    this.drop();
    if (this.active) this.done(problem);
  }

  /** The answer is complete (`leftover`: bytes beyond it, or the connection is ending). */
  private complete(leftover: boolean): void {
    if (leftover || !this.parser.keepAlive) this.drop();
    else {
      const hint = this.parser.keepAliveTimeout;
      this.keepMs = hint < 0 ? UPSTREAM_KEEP_ALIVE_MS : Math.min(UPSTREAM_KEEP_ALIVE_MS, hint * 1000 - UPSTREAM_KEEP_ALIVE_MARGIN_MS);
    }
    // Complete, but past the deadline (a body that trickled in between the reader's checks).
    if (performance.now() - this.startedAt > this.timeoutMs) {
      this.done(this.late);
      return;
    }
    this.scanner.end();
    this.done(undefined);
  }

  /** Ends the reading under way with `problem`, its connection dropped. */
  private stop(problem: string): void {
    if (!this.active) return;
    this.drop();
    this.done(problem);
  }

  private done(problem: string | undefined): void {
    this.active = false;
    this.sink.readingDone(this, problem);
  }

  // ── the answer (ResponseSink) ──────────────────────────────────────────────────────────────

  onResponseField(): void {
    // The parser reads the framing fields itself; nothing else of the head matters.
  }

  onResponseHead(status: number, contentLength: number): void {
    if (status < 200 || status > 299) this.stop(`status ${status}`);
    else if (contentLength > LOAD_READ_MAX_BYTES) this.stop(TOO_LARGE);
  }

  onResponseBody(chunk: Buffer): void {
    if (!this.active) return;
    this.bytes += chunk.length;
    if (this.bytes > LOAD_READ_MAX_BYTES) this.stop(TOO_LARGE);
    else this.scanner.write(chunk);
  }
}
