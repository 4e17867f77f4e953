// One replica's readings of its Prometheus endpoint (docs/configuration.md#the-model-servers-own-queue),
// on Sluice's own upstream client (src/upstream/: a raw socket and the strict response parser), not
// node:http: four readings a second never get node:http's client machinery out of V8's baseline
// tier, and it made garbage per reading (docs/architecture.md#where-the-time-goes).
//
// - One `ExpositionRead` per replica, reused for every reading, is the exchange's handler: no
//   closure, promise or timer per reading. Its pool holds at most one kept-alive connection; the
//   pool reconnects when the replica closed it between readings.
// - At most LOAD_READ_MAX_BYTES (1 MiB) of a body is read. A larger one fails the reading with
//   `larger than 1048576 bytes`: at once when its Content-Length says so, else when the byte past
//   the limit arrives; the connection is dropped then and nothing more of it is read. A partial
//   exposition is not a reading: the series beyond the limit would be missing from the sums.
// - Each piece of the body is scanned in the read that delivered it; nothing of the body is kept
//   but what the scanner carries (at most one short line).
// - The deadline, `timeoutMs` for the whole reading: the pool's connect, status-line and body-idle
//   deadlines are each `timeoutMs` (the one coarse clock, docs/architecture.md#fact-8), and the
//   reader's own interval cuts a reading still going when it has run longer (`overdue`: a body
//   that trickles in); one that completes after it fails all the same.
// - A failure is a problem string (`status 500`, `ECONNRESET`, `no answer within 500 ms`, `closed`,
//   …) for the log and /status; the reading ends in exactly one `readingDone`.
import type { RelayError } from '../../http/errors.js';
import { errorCode } from '../../http/error-code.js';
import { hostAndPort } from '../../http/syntax.js';
import { UpstreamError } from '../../upstream/errors.js';
import type { UpstreamExchange, UpstreamHandler } from '../../upstream/handler.js';
import { UpstreamPool } from '../../upstream/pool.js';
import { LOAD_READ_MAX_BYTES } from '../../tunables.js';
import type { MetricScanner } from './metric-scanner.js';
import type { ManagedReplica } from './replica.js';

const TOO_LARGE = `larger than ${LOAD_READ_MAX_BYTES} bytes`;

/** Where a reading ends: `problem` undefined, the scanner has the whole exposition. */
export interface ReadingSink {
  readingDone(read: ExpositionRead, problem: string | undefined): void;
}

/** The readings of one replica's endpoint `origin + path`, one at a time. */
export class ExpositionRead implements UpstreamHandler {
  private readonly pool: UpstreamPool;
  private readonly head: string;
  /** The problem of a reading that missed its deadline. */
  private readonly late: string;
  /** A reading is under way (between `start` and `readingDone`). */
  private active = false;
  /** The exchange of the reading under way, once it has a connection. */
  private exchange: UpstreamExchange | undefined = undefined;
  /** The body bytes of the reading under way. */
  private bytes = 0;
  /** performance.now() when the reading under way began. */
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
    const { host, port } = hostAndPort(url);
    this.pool = new UpstreamPool(host, port, { maxConnections: 1, connectMs: timeoutMs, headersMs: timeoutMs, bodyIdleMs: timeoutMs });
    this.head = `GET ${path} HTTP/1.1\r\nhost: ${url.host}\r\naccept: text/plain;version=0.0.4, */*;q=0.1\r\naccept-encoding: identity\r\nuser-agent: sluice-load\r\n\r\n`;
    this.late = `no answer within ${timeoutMs} ms`;
  }

  /** A reading is under way. */
  get reading(): boolean {
    return this.active;
  }

  /** Starts a reading (none may be under way): the scanner is reset, the pool asked for its connection. */
  start(now: number): void {
    this.active = true;
    this.startedAt = now;
    this.bytes = 0;
    this.scanner.reset();
    this.pool.request(this);
  }

  /** Cuts the reading under way if it has run past its deadline at `now` (the reader's interval). */
  overdue(now: number): void {
    if (this.active && now - this.startedAt > this.timeoutMs) this.stop(this.late);
  }

  /** Closes the connection; a reading under way ends with `closed`. */
  close(): void {
    this.stop('closed');
    this.pool.destroy();
  }

  /** Ends the reading under way with `problem`, its connection dropped. */
  private stop(problem: string): void {
    if (!this.active) return;
    const exchange = this.exchange;
    if (exchange !== undefined) exchange.abort();
    else this.pool.cancel(this);
    this.done(problem);
  }

  private done(problem: string | undefined): void {
    this.active = false;
    this.exchange = undefined;
    this.sink.readingDone(this, problem);
  }

  // ── UpstreamHandler ────────────────────────────────────────────────────────────────────────

  onUpstreamConnection(connection: UpstreamExchange): void {
    this.exchange = connection;
    connection.send(this.head, true, false, undefined, true);
  }

  onUpstreamField(): void {
    // The connection reads the framing fields itself; nothing else of the head matters.
  }

  onUpstreamHead(status: number, contentLength: number): void {
    if (status < 200 || status > 299) this.stop(`status ${status}`);
    else if (contentLength > LOAD_READ_MAX_BYTES) this.stop(TOO_LARGE);
  }

  onUpstreamRead(parse: () => void): boolean {
    parse();
    return true;
  }

  onUpstreamHeadRead(): void {}

  onUpstreamData(chunk: Buffer): boolean {
    if (!this.active) return true;
    this.bytes += chunk.length;
    if (this.bytes > LOAD_READ_MAX_BYTES) this.stop(TOO_LARGE);
    else this.scanner.write(chunk);
    return true;
  }

  onUpstreamEnd(): void {
    if (!this.active) return;
    // Complete, but past the deadline (a body that trickled in between the reader's checks).
    if (performance.now() - this.startedAt > this.timeoutMs) {
      this.done(this.late);
      return;
    }
    this.scanner.end();
    this.done(undefined);
  }

  onUpstreamError(error: RelayError): void {
    if (this.active) this.done(problemOf(error, this.late));
  }

  onUpstreamWritable(): void {}
}

/**
 * The words of a failed exchange (docs/configuration.md#the-model-servers-own-queue): a deadline is
 * `no answer within N ms`, a connection closed under the reading (or a pool closed) `closed`, a
 * malformed answer the parser's reason, a socket's failure its code (`ECONNREFUSED`).
 */
function problemOf(error: RelayError, late: string): string {
  const cause = error.cause;
  if (!(cause instanceof UpstreamError)) return errorCode(cause);
  switch (cause.code) {
    case 'UPSTREAM_CONNECT_TIMEOUT':
    case 'UPSTREAM_HEADERS_TIMEOUT':
    case 'UPSTREAM_BODY_TIMEOUT':
      return late;
    case 'UPSTREAM_MALFORMED':
      return cause.message;
    default:
      return 'closed';
  }
}
