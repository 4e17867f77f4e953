// `bare`: about the least a relay on Sluice's stack can do — uWS in, a keep-alive pool of
// `net.Socket`s out (as src/upstream/), and nothing else: no auth, no header policy, no request
// checks, no logs, no metrics, no timeouts, no backpressure, and a response parser that trusts
// the replica (Content-Length or chunked, nothing refused). Its CPU per request is the floor of
// uWS + Node for this exchange, so the difference to Sluice is what Sluice's own work costs.
// Settings: BENCH_REPLICA_URL (required); SLUICE_UWS_BUILD as for Sluice (the same build as the gateway).
import { connect, type Socket } from 'node:net';
import type { HttpResponse } from 'uWebSockets.js';
import { loadUwsBuild, uws } from '../src/http/uws-build.js';
import { announceReady, exitOnStop } from './lib/child-side.js';

const replica = new URL(process.env['BENCH_REPLICA_URL']!);
const HOST = replica.hostname;
const PORT = Number(replica.port);
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
const CRLF2 = Buffer.from('\r\n\r\n');

/** The caller's side of one exchange. */
interface Exchange {
  res: HttpResponse;
  aborted: boolean;
}

/** One upstream connection and the state of the answer it is reading. */
class Upstream {
  readonly socket: Socket;
  exchange: Exchange | undefined = undefined;
  private head: Buffer | undefined = undefined;
  /** -1: reading the head; else bytes of the current body (or chunk) still to come. */
  private remaining = -1;
  private chunked = false;
  /** Chunked: a partial size line carried to the next read. */
  private line = '';
  private headerSent = false;
  private status = '';
  private contentType = '';
  private total = -1;

  constructor() {
    this.socket = connect({ host: HOST, port: PORT, noDelay: true, onread: { buffer: READ_BUFFER, callback: (n) => this.onRead(n) } });
    this.socket.on('error', () => this.fail());
    this.socket.on('close', () => {
      all.delete(this);
      const i = idle.indexOf(this);
      if (i >= 0) idle.splice(i, 1);
      this.fail();
    });
    all.add(this);
  }

  send(exchange: Exchange, head: string, body: Buffer): void {
    this.exchange = exchange;
    this.remaining = -1;
    this.head = undefined;
    this.headerSent = false;
    const out = Buffer.allocUnsafe(head.length + body.length);
    out.write(head, 0, 'latin1');
    body.copy(out, head.length);
    this.socket.write(out);
  }

  private onRead(n: number): boolean {
    let buf = READ_BUFFER.subarray(0, n);
    let pos = 0;
    if (this.remaining < 0) {
      if (this.head !== undefined) buf = Buffer.concat([this.head, buf]);
      const end = buf.indexOf(CRLF2);
      if (end < 0) {
        this.head = Buffer.from(buf);
        return true;
      }
      this.head = undefined;
      this.readHead(buf.toString('latin1', 0, end));
      pos = end + 4;
      if (!this.chunked && this.remaining === 0) this.done();
    }
    while (pos < buf.length && this.exchange !== undefined) {
      if (this.chunked && this.remaining === 0) {
        const lf = buf.indexOf(10, pos);
        if (lf < 0) {
          this.line += buf.toString('latin1', pos, buf.length);
          break;
        }
        const line = this.line + buf.toString('latin1', pos, lf - 1);
        this.line = '';
        pos = lf + 1;
        if (line === '') continue; // the CRLF after a chunk's data
        const size = parseInt(line, 16);
        if (size === 0) {
          this.done(); // the trailer section's CRLF is left unread: the replica sends none
          break;
        }
        this.remaining = size;
        continue;
      }
      const take = Math.min(this.remaining, buf.length - pos);
      this.relay(buf.subarray(pos, pos + take));
      this.remaining -= take;
      pos += take;
      if (!this.chunked && this.remaining === 0) this.done();
    }
    return true;
  }

  private readHead(text: string): void {
    this.status = text.slice(9, text.indexOf('\r\n'));
    this.chunked = /\r\ntransfer-encoding: *chunked/i.test(text);
    const length = /\r\ncontent-length: *(\d+)/i.exec(text);
    this.total = length === null ? -1 : Number(length[1]);
    this.remaining = this.chunked ? 0 : this.total;
    this.contentType = /\r\ncontent-type: *([^\r]*)/i.exec(text)?.[1] ?? 'application/octet-stream';
  }

  private relay(chunk: Buffer): void {
    const x = this.exchange!;
    if (x.aborted) return;
    x.res.cork(() => {
      this.writeHead(x.res);
      if (this.total < 0) x.res.write(chunk);
      else x.res.tryEnd(chunk, this.total);
    });
  }

  private writeHead(res: HttpResponse): void {
    if (this.headerSent) return;
    this.headerSent = true;
    res.writeStatus(this.status).writeHeader('content-type', this.contentType);
  }

  private done(): void {
    const x = this.exchange!;
    this.exchange = undefined;
    idle.push(this);
    if (x.aborted || this.total > 0) return; // a known-length answer ended with its last byte
    x.res.cork(() => {
      this.writeHead(x.res);
      x.res.end();
    });
  }

  private fail(): void {
    const x = this.exchange;
    this.exchange = undefined;
    if (x !== undefined && !x.aborted) x.res.cork(() => (this.headerSent ? x.res.close() : x.res.writeStatus('502 Bad Gateway').end()));
    this.socket.destroy();
  }
}

const all = new Set<Upstream>();
const idle: Upstream[] = [];

await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined);
const uWS = uws();
const app = uWS.App().any('/*', (res, req) => {
  const method = req.getCaseSensitiveMethod();
  const query = req.getQuery();
  const target = query ? `${req.getUrl()}?${query}` : req.getUrl();
  const contentType = req.getHeader('content-type');
  const exchange: Exchange = { res, aborted: false };
  res.onAborted(() => (exchange.aborted = true));
  const parts: Buffer[] = [];
  res.onData((ab, isLast) => {
    parts.push(Buffer.copyBytesFrom(new Uint8Array(ab)));
    if (!isLast) return;
    const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    let head = `${method} ${target} HTTP/1.1\r\nhost: ${HOST}:${PORT}\r\n`;
    if (contentType !== '') head += `content-type: ${contentType}\r\n`;
    if (body.length > 0 || method === 'POST') head += `content-length: ${body.length}\r\n`;
    (idle.pop() ?? new Upstream()).send(exchange, `${head}\r\n`, body);
  });
});

app.listen('127.0.0.1', 0, (socket) => {
  if (socket === false) {
    process.stderr.write('bench bare relay: cannot listen\n');
    process.exit(1);
  }
  announceReady(uWS.us_socket_local_port(socket));
});
exitOnStop(() => {
  for (const u of all) u.socket.destroy();
  app.close();
});
