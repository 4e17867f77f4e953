// A router on one front-end thread (docs/api.md#routers): its tokens, and the services its models
// are served by. The request filter treats it as a service until the body is here: it checks the
// router's tokens, priority header and limits, and the request holds its body (every framing,
// up to ROUTER_MODEL_BYTES: held-bodies.ts), its fields read as it arrives (body-fields.ts). Once
// the body is complete or that much is held, `route` takes its `"model"` and names the service;
// from there the request is that service's (relay.ts), with the held bytes sent on as they are,
// and the rest of the body read on for a `"model"` that says otherwise.
// `GET …/request/v1/models` lists the models with what this thread's view of each service's
// replicas says (the slot table: no message to the control plane).
import type { HttpResponse } from 'uWebSockets.js';
import type { RouterConfig, ServiceConfig } from '../config/types.js';
import { RelayError } from '../http/errors.js';
import type { LimitTable } from '../limits/limit-table.js';
import type { StreamCounters } from '../metrics/request-counters.js';
import type { TokenUsage } from '../metrics/token-usage.js';
import { hashKey, NO_AFFINITY } from '../replicas/affinity-ring.js';
import type { ReplicaSet, ReplicaWaiter } from './replica-set.js';
import { MAX_DURATION_MS } from '../config/rules.js';
import { ROUTER_MODEL_BYTES } from '../tunables.js';
import { type TokenEntry, tokenEntries } from './request/auth.js';
import { type BodyFields, NoModel } from './body/body-fields.js';
import type { CallerHeaders } from './request/headers.js';
import { requestMaxWait } from './request/headers.js';
import { HeldBodies } from './body/held-bodies.js';
import type { ServiceRuntime } from './service-runtime.js';

/** What a router routes to: a service as the request filter has it (request-filter.ts, ServiceEntry). */
export interface RoutedService extends ServiceRuntime {
  readonly config: Pick<ServiceConfig, 'slug' | 'maxRequestBytes' | 'queue' | 'timeouts' | 'sessions'>;
  readonly forward: ReadonlySet<string>;
  readonly affinity: string;
}

const ROUTER_METHODS: ReadonlySet<string> = new Set(['POST', 'GET']);
export const MODEL_LIST_PATH = '/v1/models';

/** A router's replicas before its request is routed: never asked (relay.ts starts a request once it is routed). */
const UNROUTED: ReplicaSet = {
  slug: '',
  acquire: (waiter: ReplicaWaiter) => waiter.onNoReplica(new RelayError('internal_error')),
  cancel: () => false,
  release: () => undefined,
  drain: () => undefined,
  close: async () => undefined,
  readiness: () => 'cold',
  expectedReadyInMs: () => -1,
  queuedNow: () => 0,
};

export class ModelRouter implements ServiceRuntime {
  /** A reload builds the router anew (data-plane.ts). */
  readonly tokens: TokenEntry[];
  readonly config: ServiceRuntime['config'];
  readonly replicas = UNROUTED;
  readonly streams: StreamCounters;
  readonly held: HeldBodies;
  /** Read with the caller's headers: what any of its services forwards or keeps sessions by. */
  readonly forward: ReadonlySet<string>;
  readonly methods = ROUTER_METHODS;
  readonly allow = 'POST, GET';
  readonly affinity = '';
  private readonly byModel = new Map<string, RoutedService>();

  constructor(
    router: RouterConfig,
    /** Its models in order, each with the service that serves it (routedModels). */
    readonly models: readonly (readonly [string, RoutedService])[],
    readonly limitTable: LimitTable,
    cells: readonly number[],
    /** This thread's LLM token usage: the router's tokens count under its slug (metrics/token-usage.ts). */
    usage: TokenUsage,
  ) {
    this.config = { slug: router.slug, maxRequestBytes: Number.MAX_SAFE_INTEGER, queue: { maxRequests: 0, maxWaitMs: MAX_DURATION_MS, keepAliveMs: 0 } };
    const block = usage.routerBlock(router.slug);
    this.tokens = tokenEntries(router.tokens, router.limits, cells, limitTable, (name) => usage.place(block, name));
    const forward = new Set<string>();
    let queued = 0;
    for (const [model, service] of models) {
      this.byModel.set(model, service);
      for (const name of service.forward) forward.add(name);
      if (service.affinity !== '') forward.add(service.affinity);
      queued += service.config.queue.maxRequests;
    }
    this.forward = forward;
    // Its holds may take what its services' queues may (at least one whole hold): past that, the
    // model is looked for in what is held.
    this.held = new HeldBodies({ uploads: { bufferBytes: ROUTER_MODEL_BYTES }, queue: { maxRequests: queued } }, true);
    this.streams = models[0]![1].streams;
  }

  /** The service serving the model the body's first part names (`fields`: read so far; `complete`: all of it), or the error to answer with. */
  route(fields: BodyFields, complete: boolean): RoutedService | RelayError {
    const model = fields.model(complete);
    if (model instanceof NoModel) return new RelayError('bad_request', { message: model.message });
    return this.serviceOf(model);
  }

  /** The service serving `model`, or `404 model_not_found` (a realtime session's `model` query parameter, too). */
  serviceOf(model: string): RoutedService | RelayError {
    const service = this.byModel.get(model);
    if (service !== undefined) return service;
    const shown = model.length > 256 ? `${model.slice(0, 256)}…` : model;
    return new RelayError('model_not_found', { message: `The model '${shown}' does not exist or is not served by this router.` });
  }

  /** `GET …/v1/models`: every model, cold ones included, as OpenAI's model list. */
  modelList(): string {
    const data = this.models.map(([id, service]) => ({ id, object: 'model', owned_by: 'sluice', service: service.config.slug, state: service.replicas.readiness() }));
    return JSON.stringify({ object: 'list', data });
  }
}

/** The models of `router` in `services` (config order), each with its service; `byIndex`: the services as this thread has them. */
export function routedModels<S extends RoutedService>(router: RouterConfig, services: readonly { slug: string; models?: string[] | undefined }[], byIndex: readonly S[]): [string, S][] {
  const named = router.services === undefined ? undefined : new Set(router.services);
  const out: [string, S][] = [];
  services.forEach((s, i) => {
    if (named !== undefined && !named.has(s.slug)) return;
    for (const model of s.models ?? []) out.push([model, byIndex[i]!]);
  });
  return out;
}

/**
 * The routed request's own wait in its service's queue (`X-Sluice-Max-Wait-Ms`, checked by the
 * filter) and its affinity hash; the forwarded headers are cut to what the service forwards.
 */
export function routedTerms(service: RoutedService, headers: CallerHeaders): { maxWaitMs: number; affinity: number } {
  const maxWaitMs = requestMaxWait(headers, service.config.queue.maxWaitMs) as number;
  let affinity = NO_AFFINITY;
  const all = headers.forwarded;
  if (all !== undefined) {
    const kept: string[] = [];
    for (let i = 0; i < all.length; i += 2) {
      const name = all[i]!;
      const value = all[i + 1]!;
      if (name === service.affinity && affinity === NO_AFFINITY && value !== '') affinity = hashKey(value);
      if (service.forward.has(name)) kept.push(name, value);
    }
    headers.forwarded = kept.length === 0 ? undefined : kept;
  }
  return { maxWaitMs, affinity };
}

/** Answers `GET …/v1/models` on the next turn of the event loop (as refusals are: docs/architecture.md#fact-10). */
export function answerModelList(res: HttpResponse, router: ModelRouter, requestId: string, close: boolean): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  setImmediate(() => {
    if (aborted) return;
    const body = router.modelList();
    res.cork(() => {
      res.writeStatus('200 OK');
      res.writeHeader('content-type', 'application/json');
      res.writeHeader('x-request-id', requestId);
      res.end(body, close);
    });
  });
}
