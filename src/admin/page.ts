// The service overview on the admin listener: `GET /` (the page, from the
// files in src/admin/ui, read once at start), `GET /status` (JSON) and `GET /status/events`
// (server-sent events: the chart history once, then the status and a chart point every second).
// Never registered on the relay listener: it names services and their state.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { Config } from '../config/types.js';
import type { Logger } from '../log/logger.js';
import type { Metrics } from '../metrics/metrics.js';
import { SAMPLE_INTERVAL_MS } from '../tunables.js';

import { StatusBoard, type StatusBoardOptions } from './status.js';
import { createStatusSource, type SnapshotSource } from './status-source.js';

/** At most this many pages streaming at once; more get `503` (each costs a write a second). */
const MAX_EVENT_STREAMS = 64;

/** A stream whose caller has not read for this long is closed. */
const STALLED_STREAM_MS = 30_000;

/** The page's files: shipped in the package as source (`src/admin/ui`), found from `dist/src/admin` too. */
export const UI_DIR = fileURLToPath(new URL('../../../src/admin/ui/', import.meta.url));

const ASSETS: ReadonlyArray<{ route: string; file: string; type: string }> = [
  { route: '/', file: 'index.html', type: 'text/html; charset=utf-8' },
  { route: '/ui/app.js', file: 'app.js', type: 'text/javascript; charset=utf-8' },
  { route: '/ui/snippets.js', file: 'snippets.js', type: 'text/javascript; charset=utf-8' },
  { route: '/ui/routing-text.js', file: 'routing-text.js', type: 'text/javascript; charset=utf-8' },
  { route: '/ui/style.css', file: 'style.css', type: 'text/css; charset=utf-8' },
  { route: '/ui/favicon.svg', file: 'favicon.svg', type: 'image/svg+xml' },
];

/** Same-origin files only, no inline code, no framing: the page shows internal addresses. */
const SECURITY_HEADERS: ReadonlyArray<[string, string]> = [
  [
    'content-security-policy',
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  ],
  ['x-content-type-options', 'nosniff'],
  ['referrer-policy', 'no-referrer'],
];

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

interface EventStream {
  res: HttpResponse;
  /** The Host header the page was loaded by, for base URLs (see StatusBoard.status). */
  host: string | undefined;
  /** `performance.now()` when a write was last buffered; 0 while the caller keeps up. */
  blockedSince: number;
}

export interface AdminPageOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** The services' replica sets (or control planes), in config order. */
  services: readonly SnapshotSource[];
  relayPort: () => number;
  /** Every limited token's use now, for /status. */
  limits?: StatusBoardOptions['limits'];
  /** Every pool's units and holders now, for /status. */
  pools?: StatusBoardOptions['pools'];
  /** The routers as last applied (start or SIGHUP), for /status. */
  routers?: StatusBoardOptions['routers'];
}

export class AdminPage {
  private readonly board: StatusBoard;
  private readonly streams = new Set<EventStream>();
  private readonly logger: Logger;

  constructor(app: TemplatedApp, options: AdminPageOptions) {
    this.logger = options.logger;
    this.board = new StatusBoard({
      config: options.config,
      source: createStatusSource(options.services, options.metrics),
      logger: options.logger,
      relayPort: options.relayPort,
      onSample: () => this.broadcast(),
      ...(options.limits === undefined ? {} : { limits: options.limits }),
      ...(options.pools === undefined ? {} : { pools: options.pools }),
      ...(options.routers === undefined ? {} : { routers: options.routers }),
    });
    for (const { route, file, type } of ASSETS) {
      const asset = loadAsset(file, type, this.logger);
      app.get(route, (res, req) => serveAsset(res, req, asset, false));
      app.head(route, (res, req) => serveAsset(res, req, asset, true));
    }
    app.get('/status', (res, req) => {
      const body = JSON.stringify(this.board.status(req.getHeader('host') || undefined));
      res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').writeHeader('cache-control', 'no-store').end(body));
    });
    app.get('/status/events', (res, req) => this.openStream(res, req));
  }

  close(): void {
    this.board.close();
    for (const stream of this.streams) stream.res.cork(() => stream.res.end());
    this.streams.clear();
  }

  private openStream(res: HttpResponse, req: HttpRequest): void {
    if (this.streams.size >= MAX_EVENT_STREAMS) {
      res.cork(() => res.writeStatus('503 Service Unavailable').writeHeader('retry-after', '10').end('too many open status pages\n'));
      return;
    }
    const host = req.getHeader('host') || undefined;
    const stream: EventStream = { res, host, blockedSince: 0 };
    this.streams.add(stream);
    res.onAborted(() => this.streams.delete(stream));
    const first =
      `retry: ${SAMPLE_INTERVAL_MS * 2}\n\n` +
      event('history', { intervalMs: SAMPLE_INTERVAL_MS, services: this.board.history() }) +
      event('status', { ...this.board.status(host), points: this.board.latest() });
    res.cork(() => {
      res.writeStatus('200 OK').writeHeader('content-type', 'text/event-stream').writeHeader('cache-control', 'no-store');
      res.write(first);
    });
  }

  /** After each sample: the status and the newest chart points to every open page. */
  private broadcast(): void {
    if (this.streams.size === 0) return;
    const points = this.board.latest();
    const byHost = new Map<string | undefined, string>();
    const now = performance.now();
    for (const stream of this.streams) {
      const host = stream.host;
      let text = byHost.get(host);
      if (text === undefined) {
        text = event('status', { ...this.board.status(host), points });
        byHost.set(host, text);
      }
      if (stream.blockedSince > 0) {
        // The caller has not read what it was sent: skip it, and give up after a while.
        if (now - stream.blockedSince > STALLED_STREAM_MS) {
          this.streams.delete(stream);
          stream.res.cork(() => stream.res.close());
        }
        continue;
      }
      const res = stream.res;
      let ok = true;
      res.cork(() => {
        ok = res.write(text);
      });
      if (!ok) {
        stream.blockedSince = now;
        res.onWritable(() => {
          stream.blockedSince = 0;
          return true;
        });
      }
    }
  }
}

function event(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

function loadAsset(file: string, type: string, logger: Logger): Asset | undefined {
  try {
    const body = readFileSync(new URL(file, `file://${UI_DIR}`));
    return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
  } catch (err) {
    logger.error({ err, dir: UI_DIR, file }, 'status page file missing');
    return undefined;
  }
}

/** A file with a strong ETag: browsers revalidate each time (`no-cache`) and get `304` when unchanged. */
function serveAsset(res: HttpResponse, req: HttpRequest, asset: Asset | undefined, head: boolean): void {
  if (asset === undefined) {
    res.cork(() => res.writeStatus('500 Internal Server Error').writeHeader('content-type', 'text/plain').end('the status page files are missing from this installation\n'));
    return;
  }
  const notModified = req.getHeader('if-none-match').split(/\s*,\s*/).includes(asset.etag);
  res.cork(() => {
    res.writeStatus(notModified ? '304 Not Modified' : '200 OK');
    res.writeHeader('content-type', asset.type).writeHeader('etag', asset.etag).writeHeader('cache-control', 'no-cache');
    for (const [name, value] of SECURITY_HEADERS) res.writeHeader(name, value);
    if (notModified) {
      res.endWithoutBody();
    } else if (head) {
      // endWithoutBody(length) aborts the process with this uWS build; the header by hand works.
      res.writeHeader('content-length', String(asset.body.length)).endWithoutBody();
    } else {
      res.end(asset.body);
    }
  });
}
