// The EndpointSlices of one Service, kept current by list + watch (contract section 11).
//
// Our own loop around the client's `Watch` rather than its informer, because the informer stops
// for good after any error that is not 410 (fact 15), sends no `allowWatchBookmarks`, and has no
// guard against a watch that stays open but silent (a half-open connection after a network
// partition: the cache goes stale without an error, the failure KEDA's interceptor users reported
// as "first request after a long idle times out"). Here:
//
// - list (labelSelector `kubernetes.io/service-name=<service>`), then watch from the list's
//   resourceVersion with bookmarks and a server-side `timeoutSeconds`;
// - a clean end of the watch resumes from the last resourceVersion seen (bookmarks move it);
// - `410 Gone` (an ERROR event or the status) relists: the new list replaces the cache, so a
//   slice that is still there is never dropped, and one deleted meanwhile goes;
// - any other error (refused, reset, 5xx, a failed list) resumes after a backoff, logged once;
//   the cache is kept as it was, so known endpoints keep serving while the API server is away;
// - no line (event or bookmark) for `stallMs`: the watch is aborted and resumed.
import type { DiscoveryV1Api, KubeConfig, V1EndpointSlice } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from '../../../log.js';
import { type ApiTrouble, callOptions, sleep, statusOf } from './api-trouble.js';
import { SERVICE_NAME_LABEL } from './endpoints.js';

export interface WatchTuning {
  /** `timeoutSeconds` asked of the API server: it ends the watch cleanly after this long. */
  watchTimeoutSeconds: number;
  /** A watch silent this long (no event, no bookmark) is taken for dead and restarted. */
  watchStallMs: number;
  /** Deadline of the list call. */
  callTimeoutMs: number;
}

/** `kind: Status` in an ERROR event. */
interface WatchStatus {
  code?: number;
  reason?: string;
  message?: string;
}

export class EndpointSliceWatch {
  /** Slice name → slice. */
  private readonly slices = new Map<string, V1EndpointSlice>();
  private resourceVersion = '';
  private readonly stopper = new AbortController();
  private running: Promise<void> | undefined;
  private current: AbortController | undefined;

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
    this.current?.abort();
    if (this.running === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.running, new Promise<void>((resolve) => (timer = setTimeout(resolve, 1_000)))]);
    clearTimeout(timer);
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
      const outcome = await this.watchOnce();
      if (outcome === 'gone') {
        this.log.info({ service: this.service, resourceVersion: this.resourceVersion }, 'endpointslice watch expired (410 Gone); relisting');
        this.resourceVersion = '';
      } else if (outcome !== 'ended') {
        await sleep(this.trouble.failed('endpointslices.watch', outcome), this.stopper.signal);
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

  /**
   * One watch request: resolves `ended` (clean end: resume), `gone` (410: relist), or the error
   * that ended it (resume after a backoff).
   */
  private watchOnce(): Promise<'ended' | 'gone' | unknown> {
    return new Promise((resolve) => {
      let settled = false;
      let gone = false;
      let sawLine = false;
      let stallTimer: NodeJS.Timeout | undefined;
      const controller = new AbortController();
      this.current = controller;
      let request: AbortController | undefined;
      const finish = (result: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(stallTimer);
        this.current = undefined;
        request?.abort();
        resolve(result);
      };
      const armStall = (): void => {
        clearTimeout(stallTimer);
        stallTimer = setTimeout(() => {
          this.log.debug({ service: this.service, stallMs: this.tuning.watchStallMs }, 'endpointslice watch silent; restarting it');
          finish(Object.assign(new Error('watch stalled'), { code: 'WATCH_STALLED' }));
        }, this.tuning.watchStallMs);
        stallTimer.unref();
      };
      controller.signal.addEventListener('abort', () => finish('ended'), { once: true });
      armStall();
      const watch = new Watch(this.kubeConfig);
      watch
        .watch(
          `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(this.namespace)}/endpointslices`,
          {
            labelSelector: `${SERVICE_NAME_LABEL}=${this.service}`,
            resourceVersion: this.resourceVersion,
            allowWatchBookmarks: true,
            timeoutSeconds: this.tuning.watchTimeoutSeconds,
          },
          (type: string, object: unknown) => {
            if (settled) return;
            armStall();
            if (!sawLine) {
              sawLine = true;
              this.trouble.succeeded('endpointslices.watch');
            }
            if (type === 'ERROR') {
              const s = object as WatchStatus;
              if (s.code === 410) gone = true;
              else finish(Object.assign(new Error(s.message ?? 'watch error'), { statusCode: s.code, body: s }));
              return;
            }
            this.apply(type, object as V1EndpointSlice);
          },
          (err: unknown) => {
            if (gone || statusOf(err) === 410) finish('gone');
            else if (err === null || err === undefined) finish('ended');
            else finish(err);
          },
        )
        .then(
          (req: AbortController) => {
            request = req;
            if (settled) req.abort();
          },
          (err: unknown) => finish(err),
        );
    });
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
