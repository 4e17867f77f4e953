// Loading and unloading services on demand, on the admin listener (docs/operations.md#loading-and-unloading):
// `POST /services/{slug}/load` starts a replica ahead of traffic and answers at once with the
// service's state (`202` while it starts: the caller watches `/status` or simply sends its
// request, which waits for that start); `POST /services/{slug}/unload` stops the service's idle
// replicas now (requests in flight finish on theirs), which frees a pool's units for another
// service. Both change what runs, so unlike the rest of the admin listener they need a bearer
// token of `admin.tokens` (a page on another origin cannot send one: no cross-site form works).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { RelayError } from '../http/errors.js';
import type { Logger } from '../log/logger.js';

/** A service as load and unload act on it (the control plane's ServiceControl). */
interface OnDemandService {
  readonly slug: string;
  preload(): 'ready' | 'starting' | 'cold' | 'draining';
  unload(): { stopped: string[]; kept: string[] } | undefined;
}

/** How the admin listener refuses a request (the relay's error shape and access line, from the gateway). */
interface AdminRefusals {
  /** True when the request was refused for its head (ambiguous framing, a body): answered and closed. */
  refusedHead(res: HttpResponse, req: HttpRequest): boolean;
  /** `head`: a HEAD request (the answer without its body). */
  refuse(res: HttpResponse, error: RelayError, head?: boolean): void;
}

export interface OnDemandOptions {
  services: readonly OnDemandService[];
  /** `admin.tokens`: who may load and unload. */
  tokens: ReadonlyArray<{ name: string; sha256: string }> | undefined;
  logger: Logger;
  refusals: AdminRefusals;
}

const BEARER = /^Bearer[ \t]+([^ \t]+)[ \t]*$/i;

const NO_TOKENS = new RelayError('unauthorized', {
  message: 'Loading and unloading need a token of admin.tokens, which is not set.',
  headers: { 'www-authenticate': 'Bearer realm="sluice-admin"' },
});
const BAD_TOKEN = new RelayError('unauthorized', {
  message: 'A valid admin bearer token (admin.tokens) is required.',
  headers: { 'www-authenticate': 'Bearer realm="sluice-admin"' },
});

export function addOnDemandRoutes(app: TemplatedApp, options: OnDemandOptions): void {
  const bySlug = new Map(options.services.map((s) => [s.slug, s]));
  const digests = (options.tokens ?? []).map((t) => ({ name: t.name, digest: Buffer.from(t.sha256, 'hex') }));
  const { logger, refusals } = options;

  /** The caller's admin token's name, or undefined (refused). */
  const authorized = (res: HttpResponse, req: HttpRequest): string | undefined => {
    if (digests.length === 0) {
      refusals.refuse(res, NO_TOKENS);
      return undefined;
    }
    const match = BEARER.exec(req.getHeader('authorization'));
    if (match !== null) {
      const digest = createHash('sha256').update(match[1]!).digest();
      let name: string | undefined;
      for (const t of digests) if (timingSafeEqual(digest, t.digest)) name = t.name;
      if (name !== undefined) return name;
    }
    refusals.refuse(res, BAD_TOKEN);
    return undefined;
  };

  /** The checks both actions share, in order: the head, the token, the service. */
  const target = (res: HttpResponse, req: HttpRequest): { service: OnDemandService; token: string } | undefined => {
    if (refusals.refusedHead(res, req)) return undefined;
    const slug = req.getParameter(0) ?? '';
    const token = authorized(res, req);
    if (token === undefined) return undefined;
    const service = bySlug.get(slug);
    if (service === undefined) {
      refusals.refuse(res, new RelayError('service_not_found'));
      return undefined;
    }
    return { service, token };
  };

  app.post('/services/:slug/load', (res, req) => {
    const found = target(res, req);
    if (found === undefined) return;
    const { service, token } = found;
    const state = service.preload();
    logger.info({ service: service.slug, tokenName: token, state }, 'service load asked');
    if (state === 'draining') {
      refusals.refuse(res, new RelayError('draining'));
      return;
    }
    const status = state === 'ready' ? '200 OK' : state === 'starting' ? '202 Accepted' : '409 Conflict';
    const body: Record<string, unknown> = { service: service.slug, state };
    if (state === 'cold') body['error'] = 'The service has no replicas Sluice starts (static): nothing to load.';
    answer(res, status, body);
  });

  app.post('/services/:slug/unload', (res, req) => {
    const found = target(res, req);
    if (found === undefined) return;
    const { service, token } = found;
    const result = service.unload();
    if (result === undefined) {
      logger.info({ service: service.slug, tokenName: token, stopped: [] }, 'service unload asked');
      answer(res, '409 Conflict', { service: service.slug, stopped: [], kept: [], error: 'Only launched replicas are stopped on demand.' });
      return;
    }
    logger.info({ service: service.slug, tokenName: token, stopped: result.stopped, kept: result.kept }, 'service unload asked');
    answer(res, '200 OK', { service: service.slug, ...result });
  });

  for (const action of ['load', 'unload']) {
    app.any(`/services/:slug/${action}`, (res, req) => {
      if (refusals.refusedHead(res, req)) return;
      refusals.refuse(res, new RelayError('method_not_allowed', { message: `Use POST to ${action} a service.`, headers: { allow: 'POST' } }), req.getMethod() === 'head');
    });
  }
}

function answer(res: HttpResponse, status: string, body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  res.cork(() => res.writeStatus(status).writeHeader('content-type', 'application/json').writeHeader('cache-control', 'no-store').end(text));
}
