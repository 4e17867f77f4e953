// The EndpointSlices of one Service, kept current by list + watch (docs/kubernetes.md).
//
// Our own loop around the client's `Watch` rather than its informer, because the informer stops
// for good after any error that is not 410 (fact 15), sends no `allowWatchBookmarks`, and has no
// guard against a watch that stays open but silent (a half-open connection after a network
// partition: the cache goes stale without an error, the failure KEDA's interceptor users reported
// as "first request after a long idle times out"). Here:
//
// - list (labelSelector `kubernetes.io/service-name=<service>`), then watch from the list's
//   resourceVersion with bookmarks and a server-side `timeoutSeconds`;
// - each watch request (watch-request.ts) ends saying what comes next: `gone` (410 Gone, as an
//   ERROR event or the status, acted on when it comes) lists again at once, no failure: the new
//   list replaces the cache, so a slice that is still there is never dropped, and one deleted
//   meanwhile goes; `resume` (a watch that was working, or open a second, ended or broke: a load
//   balancer cutting long connections, an API server restart) starts the next one at once from the
//   last resourceVersion seen (bookmarks move it), without a warning, so a backoff grown during an
//   outage never delays the next change by up to 10 s; `failed` (refused, a status or an ERROR
//   event other than 410, broken before it ran, a failed list) is a failure in a row: it resumes
//   after a backoff, logged once; the cache is kept as it was, so known endpoints keep serving
//   while the API server is away;
// - no line (event or bookmark) for `stallMs`: the watch is aborted and resumed.
import type { DiscoveryV1Api, KubeConfig, V1EndpointSlice } from '@kubernetes/client-node';
import type { Logger } from '../../../log/logger.js';
import { type ApiTrouble, callOptions, describeApiError, sleep } from './api-trouble.js';
import { SERVICE_NAME_LABEL } from './endpoints.js';
import { type WatchEnd, WatchRequest } from './watch-request.js';
import { settlesWithin } from '../../../time/bounded-wait.js';

/** Stopping the watch waits this long for its loop, not for a list call the API server leaves hanging. */
const WATCH_STOP_WAIT_MS = 1_000;

export interface WatchTuning {
  /** `timeoutSeconds` asked of the API server: it ends the watch cleanly after this long. */
  watchTimeoutSeconds: number;
  /** A watch silent this long (no event, no bookmark) is taken for dead and restarted. */
  watchStallMs: number;
  /** Deadline of the list call. */
  callTimeoutMs: number;
}

export class EndpointSliceWatch {
  /** Slice name → slice. */
  private readonly slices = new Map<string, V1EndpointSlice>();
  private resourceVersion = '';
  private readonly stopper = new AbortController();
  private running: Promise<void> | undefined;
  private current: WatchRequest | undefined;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly api: DiscoveryV1Api,
    private readonly namespace: string,
    private readonly service: string,
    private readonly trouble: ApiTrouble,
    private readonly log: Logger,
    private readonly tuning: WatchTuning,
    /** Called after every change of the cache, with every slice. */
    private readonly changed: (slices: Iterable<V1EndpointSlice>) => void,
  ) {}

  start(): void {
    this.running ??= this.run();
  }

  /** Ends the watch; waits for the loop, but not for a list call the API server leaves hanging. */
  async stop(): Promise<void> {
    this.stopper.abort();
    this.current?.stop();
    if (this.running === undefined) return;
    await settlesWithin(this.running, WATCH_STOP_WAIT_MS);
  }

  private get stopped(): boolean {
    return this.stopper.signal.aborted;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.resourceVersion === '') {
        try {
          await this.list();
          this.trouble.succeeded('endpointslices.list');
        } catch (err) {
          await sleep(this.trouble.failed('endpointslices.list', err), this.stopper.signal);
          continue;
        }
      }
      if (this.stopped) break;
      const end = await this.watchOnce();
      if (this.stopped) break;
      if (end.kind === 'gone') {
        this.log.info({ service: this.service, resourceVersion: this.resourceVersion }, 'endpointslice watch expired (410 Gone); relisting');
        this.resourceVersion = '';
      } else if (end.kind === 'resume') {
        // It ran: resume at once. If that fails too, it is the first failure in a row.
        if (end.err !== undefined) this.log.debug({ service: this.service, ...describeApiError(end.err) }, 'endpointslice watch broken; resuming');
      } else if (end.kind === 'failed') {
        await sleep(this.trouble.failed('endpointslices.watch', end.err), this.stopper.signal);
      }
    }
  }

  private async list(): Promise<void> {
    const list = await this.api.listNamespacedEndpointSlice(
      { namespace: this.namespace, labelSelector: `${SERVICE_NAME_LABEL}=${this.service}` },
      callOptions(this.tuning.callTimeoutMs),
    );
    this.slices.clear();
    for (const s of list.items ?? []) {
      const name = s.metadata?.name;
      if (name !== undefined) this.slices.set(name, s);
    }
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
    this.changed(this.slices.values());
  }

  /** One watch request from the last resourceVersion seen: how it ended. */
  private async watchOnce(): Promise<WatchEnd> {
    const request = new WatchRequest(
      this.kubeConfig,
      {
        path: `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(this.namespace)}/endpointslices`,
        query: {
          labelSelector: `${SERVICE_NAME_LABEL}=${this.service}`,
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: this.tuning.watchTimeoutSeconds,
        },
        stallMs: this.tuning.watchStallMs,
      },
      {
        line: (type, object) => this.apply(type, object as V1EndpointSlice),
        working: () => this.trouble.succeeded('endpointslices.watch'),
        stalled: () => this.log.debug({ service: this.service, stallMs: this.tuning.watchStallMs }, 'endpointslice watch silent; restarting it'),
      },
    );
    this.current = request;
    try {
      return await request.ended;
    } finally {
      this.current = undefined;
    }
  }

  private apply(type: string, slice: V1EndpointSlice): void {
    const rv = slice.metadata?.resourceVersion;
    if (rv !== undefined && rv !== '') this.resourceVersion = rv;
    if (type === 'BOOKMARK') return;
    const name = slice.metadata?.name;
    if (name === undefined) return;
    if (type === 'DELETED') {
      if (!this.slices.delete(name)) return;
    } else if (type === 'ADDED' || type === 'MODIFIED') {
      this.slices.set(name, slice);
    } else {
      return;
    }
    this.changed(this.slices.values());
  }
}
