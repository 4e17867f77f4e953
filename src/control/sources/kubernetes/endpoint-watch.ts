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
// - a clean end of the watch resumes from the last resourceVersion seen (bookmarks move it);
// - `410 Gone` (an ERROR event or the status) relists: the new list replaces the cache, so a
//   slice that is still there is never dropped, and one deleted meanwhile goes;
// - a watch is working once the API server has accepted it (200) and it has stayed up `WATCH_HELD_MS`,
//   or sooner if a line came: that is a success (the backoff starts again from its base, and a
//   recovery after failures is logged). When a working watch ends or breaks (a load balancer
//   cutting long connections, an API server restart), the next one starts at once, without a
//   warning: a backoff grown during an outage must not delay the next change by up to 10 s;
// - any other error (refused, reset or ended before working, 5xx, a failed list) is a failure in a
//   row: it resumes after a backoff, logged once; the cache is kept as it was, so known endpoints
//   keep serving while the API server is away;
// - no line (event or bookmark) for `stallMs`: the watch is aborted and resumed.
import type { DiscoveryV1Api, KubeConfig, V1EndpointSlice } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from '../../../log/logger.js';
import { type ApiTrouble, callOptions, describeApiError, sleep, statusOf } from './api-trouble.js';
import { SERVICE_NAME_LABEL } from './endpoints.js';
import { settlesWithin } from '../../../time/bounded-wait.js';
import { WATCH_HELD_MS, WATCH_STOP_WAIT_MS } from '../../../tunables.js';

export interface WatchTuning {
  /** `timeoutSeconds` asked of the API server: it ends the watch cleanly after this long. */
  watchTimeoutSeconds: number;
  /** A watch silent this long (no event, no bookmark) is taken for dead and restarted. */
  watchStallMs: number;
  /** Deadline of the list call. */
  callTimeoutMs: number;
}

/** How one watch request ended: `ended` (clean end), `gone` (410), or the error that ended it. */
interface WatchEnd {
  outcome: 'ended' | 'gone' | unknown;
  /** It was working before it ended (accepted and up `WATCH_HELD_MS`, or a line came). */
  held: boolean;
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
      const { outcome, held } = await this.watchOnce();
      if (this.stopped) break;
      if (outcome === 'gone') {
        this.log.info({ service: this.service, resourceVersion: this.resourceVersion }, 'endpointslice watch expired (410 Gone); relisting');
        this.resourceVersion = '';
      } else if (held) {
        // It worked until now: resume at once. If that fails too, it is the first failure in a row.
        if (outcome !== 'ended') this.log.debug({ service: this.service, ...describeApiError(outcome) }, 'endpointslice watch broken; resuming');
      } else {
        const err = outcome === 'ended' ? Object.assign(new Error('watch ended before it was working'), { code: 'WATCH_ENDED' }) : outcome;
        await sleep(this.trouble.failed('endpointslices.watch', err), this.stopper.signal);
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

  /** One watch request: how it ended, and whether it was working before. */
  private watchOnce(): Promise<WatchEnd> {
    return new Promise((resolve) => {
      let settled = false;
      let gone = false;
      let held = false;
      let acceptedAt: number | undefined;
      let stallTimer: NodeJS.Timeout | undefined;
      let heldTimer: NodeJS.Timeout | undefined;
      const controller = new AbortController();
      this.current = controller;
      let request: AbortController | undefined;
      const hold = (): void => {
        if (held) return;
        held = true;
        clearTimeout(heldTimer);
        this.trouble.succeeded('endpointslices.watch');
      };
      const finish = (result: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(stallTimer);
        // Measured here too: a busy event loop may not have run the timer yet.
        if (acceptedAt !== undefined && Date.now() - acceptedAt >= WATCH_HELD_MS) hold();
        clearTimeout(heldTimer);
        this.current = undefined;
        request?.abort();
        resolve({ outcome: result, held });
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
            hold();
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
            if (settled) {
              req.abort();
              return;
            }
            // `watch()` resolves once the response is in; when it is not a 200 (or none came) it
            // has called `done` with the error first. Still running here means accepted.
            acceptedAt = Date.now();
            heldTimer = setTimeout(hold, WATCH_HELD_MS);
            heldTimer.unref();
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
