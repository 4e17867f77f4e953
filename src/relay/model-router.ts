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
import type { PrefixConfig, RouterConfig, ServiceConfig } from '../config/types.js';
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
  /** `routing.prefix`: its prompts are hashed for prefix-aware routing, in these blocks; or undefined. */
  readonly prefix: PrefixConfig | undefined;
}

const ROUTER_METHODS: ReadonlySet<string> = new Set(['POST', 'GET']);
export const MODEL_LIST_PATH = '/v1/models';
/** `GET …/v1/models/{id}`: one model (OpenAI's retrieve). */
const MODEL_PATH = '/v1/models/';

/** A router's replicas before its request is routed: never asked (relay.ts starts a request once it is routed). */
const UNROUTED: ReplicaSet = {
  slug: '',
  acquire: (waiter: ReplicaWaiter) => waiter.onNoReplica(new RelayError('internal_error')),
  cancel: () => false,
  learnState: () => undefined,
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
  /** The blocks its requests' prompts are hashed in: those of its first service with prefix-aware routing (others with other blocks route without it). */
  readonly prefix: PrefixConfig | undefined;
  private readonly byModel = new Map<string, RoutedService>();
  /** `{basePath}/{slug}/request/v1/models`, which a 404 model_not_found points to. */
  private readonly listPath: string;

  constructor(
    router: RouterConfig,
    basePath: string,
    /** Its models in order, each with the service that serves it (routedModels). */
    readonly models: readonly (readonly [string, RoutedService])[],
    /** Each model's `created` (gateway/model-births.ts). */
    private readonly created: Readonly<Record<string, number>>,
    readonly limitTable: LimitTable,
    cells: readonly number[],
    /** This thread's LLM token usage: the router's tokens count under its slug (metrics/token-usage.ts). */
    usage: TokenUsage,
  ) {
    this.listPath = `${basePath}/${router.slug}/request${MODEL_LIST_PATH}`;
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
    this.prefix = models.find(([, s]) => s.prefix !== undefined)?.[1].prefix;
    // Its holds may take what its services' queues may (at least one whole hold): past that, the
    // model is looked for in what is held.
    this.held = new HeldBodies({ uploads: { bufferBytes: ROUTER_MODEL_BYTES }, queue: { maxRequests: queued } }, true);
    this.streams = models[0]![1].streams;
  }

  /**
   * The service serving the model the body's first part names (`fields`: read so far; `complete`: all
   * of it), or the error to answer with. A model outside `token`'s scope is refused as one that does
   * not exist.
   */
  route(fields: BodyFields, complete: boolean, token: TokenEntry): RoutedService | RelayError {
    const model = fields.model(complete);
    if (model instanceof NoModel) return new RelayError('bad_request', { message: model.message });
    return this.serviceOf(model, token);
  }

  /**
   * The service serving `model` that `token` may use, or `404 model_not_found` (a realtime
   * session's `model` query parameter, too).
   */
  serviceOf(model: string, token: TokenEntry): RoutedService | RelayError {
    const service = this.byModel.get(model);
    if (service !== undefined && (token.models === undefined || token.models.has(model))) return service;
    return this.notServed(model);
  }

  /** `GET …/v1/models`: every model `token` may use, cold ones included, as OpenAI's model list. */
  modelList(token: TokenEntry): string {
    const scope = token.models;
    const data = [];
    for (const [id, service] of this.models) if (scope === undefined || scope.has(id)) data.push(this.modelObject(id, service));
    return JSON.stringify({ object: 'list', data });
  }

  /**
   * The model a `GET …/v1/models/{id}` names (its path percent-decoded), or undefined when `path`
   * is no such request; the error to answer with for a model the router does not serve or
   * `token` may not use (the same answer: a scoped key cannot tell the two apart).
   */
  retrieved(path: string, token: TokenEntry): string | RelayError | undefined {
    if (!path.startsWith(MODEL_PATH)) return undefined;
    let id: string;
    try {
      id = decodeURIComponent(path.slice(MODEL_PATH.length));
    } catch {
      return new RelayError('bad_request', { message: 'The model id in the path is not valid percent-encoded UTF-8.' });
    }
    return this.byModel.has(id) && (token.models === undefined || token.models.has(id)) ? id : this.notServed(id);
  }

  /** `GET …/v1/models/{id}` of a model the router serves (`retrieved`): its model object. */
  modelJson(id: string): string {
    return JSON.stringify(this.modelObject(id, this.byModel.get(id)!));
  }

  /** `404 model_not_found` for `model` (OpenAI's error body: errors.ts), pointing to the model list. */
  private notServed(model: string): RelayError {
    const shown = model.length > 256 ? `${model.slice(0, 256)}…` : model;
    return new RelayError('model_not_found', { message: `The model '${shown}' does not exist or is not served by this router: GET ${this.listPath} lists the models it serves.` });
  }

  /**
   * One model object: OpenAI's fields, its service and state, and `expected_ready_ms`: while the
   * service has no replica ready and a start was measured, the expected time until one is (a start
   * under way: its time left; none: the median of its recent starts), else null.
   */
  private modelObject(id: string, service: RoutedService): Record<string, unknown> {
    const replicas = service.replicas;
    const left = replicas.expectedReadyInMs();
    return { id, object: 'model', created: this.created[id] ?? 0, owned_by: 'sluice', service: service.config.slug, state: replicas.readiness(), expected_ready_ms: left < 0 ? null : Math.round(left) };
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

/** Answers `GET …/v1/models` (`model` undefined) or `GET …/v1/models/{model}` on the next turn of the event loop (as refusals are: docs/architecture.md#fact-10). */
export function answerModels(res: HttpResponse, router: ModelRouter, token: TokenEntry, model: string | undefined, requestId: string, close: boolean): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  setImmediate(() => {
    if (aborted) return;
    const body = model === undefined ? router.modelList(token) : router.modelJson(model);
    res.cork(() => {
      res.writeStatus('200 OK');
      res.writeHeader('content-type', 'application/json');
      res.writeHeader('x-request-id', requestId);
      res.end(body, close);
    });
  });
}
