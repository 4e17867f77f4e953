// Launched replicas (`replicas.command`): when to start one, starting it through its source, and
// what its process's exit means. The state machine itself is ServiceControl's (service-control.ts);
// this class only decides and reports through it.
//
// - Scaling: a replica is started while the queue holds more requests than the replicas already
//   starting will take (`starting × concurrency`; with unlimited concurrency one starting replica
//   takes them all) and fewer than `max` replicas hold a place, or while fewer than `min` are live.
//   A place is held from the moment a replica is created (so a burst of 200 on a cold service with
//   max 1 starts exactly one, whichever workers saw them) until its process has exited (a draining
//   or killed process still holds memory, GPU included, so it still counts toward `max`).
// - Starts wait out the backoff of failed ones (tuning.ts `StartBackoff`).
// - A replica that is not ready within `startTimeoutMs` fails (its process is then stopped).
import type { ServiceConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import type { ProcessExit } from '../sources/replica-process.js';
import type { Endpoint, ReplicaSource } from '../sources/source.js';
import type { Health } from './health.js';
import type { ReplicaStateName } from '../../replicas/states.js';
import type { ManagedReplica } from './replica.js';

/** What the launcher needs of the service that owns the replicas. */
export interface LaunchOwner {
  readonly accepting: boolean;
  /** Replicas holding a place, starting, and live (starting, ready or unreachable). */
  counts(): { places: number; starting: number; live: number; queued: number };
  /** How long the next start must still wait for the backoff (0: now). */
  backoffWaitMs(): number;
  /** A new replica in `starting` with a slot of its own; undefined when no slot is free. */
  create(): ManagedReplica | undefined;
  /** The replica has an address: every data plane learns it. */
  place(r: ManagedReplica, endpoint: Endpoint): void;
  transition(r: ManagedReplica, to: ReplicaStateName, reason: string, detail?: Record<string, unknown>): boolean;
  /** Lets go of a terminal replica whose process is gone. */
  forget(r: ManagedReplica): void;
}

export class Launches {
  private backoffTimer: NodeJS.Timeout | undefined = undefined;
  /** Launches in progress; `close()` awaits them. */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly service: ServiceConfig,
    readonly source: ReplicaSource,
    private readonly owner: LaunchOwner,
    private readonly health: Health,
    private readonly log: Logger,
  ) {}

  /** Starts replicas while the queue or `min` needs them, within `max` and the backoff. */
  scale(): void {
    if (!this.owner.accepting) return;
    const { min, max, concurrency } = this.service.replicas;
    for (;;) {
      const { places, starting, live, queued } = this.owner.counts();
      if (places >= max) return;
      const startingTakes = starting === 0 ? 0 : concurrency === 0 ? Infinity : starting * concurrency;
      const forQueue = queued > startingTakes;
      if (!forQueue && live >= min) return;
      const wait = this.owner.backoffWaitMs();
      const r = wait > 0 ? undefined : this.owner.create();
      if (r === undefined) {
        // In a backoff, or every slot still has requests of a replica that is gone: look again soon.
        if (this.backoffTimer === undefined) {
          this.backoffTimer = setTimeout(() => {
            this.backoffTimer = undefined;
            this.scale();
          }, Math.max(10, Math.ceil(wait)));
          this.backoffTimer.unref();
        }
        return;
      }
      const launching = this.launch(r, forQueue ? 'queued requests' : 'min');
      this.pending.add(launching);
      void launching.finally(() => this.pending.delete(launching));
    }
  }

  /** No more starts (the service drains); launches in progress go on. */
  stopScaling(): void {
    if (this.backoffTimer !== undefined) clearTimeout(this.backoffTimer);
    this.backoffTimer = undefined;
  }

  /** Waits for the launches in progress. */
  async settled(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  private async launch(r: ManagedReplica, why: string): Promise<void> {
    let endpoint: Endpoint;
    try {
      endpoint = await this.source.start(r, why, (exit) => this.onExit(r, exit));
    } catch (err) {
      if (r.state !== 'starting') return; // closed meanwhile
      this.log.error({ service: this.service.slug, replica: r.id, err }, 'replica start failed');
      this.owner.transition(r, 'failed', 'start failed');
      return;
    }
    if (r.state !== 'starting') return;
    this.owner.place(r, endpoint);
    r.startTimer = setTimeout(() => {
      r.startTimer = undefined;
      if (r.state !== 'starting') return;
      this.owner.transition(r, 'failed', 'start timeout', {
        startTimeoutMs: this.service.replicas.startTimeoutMs,
        lastProbe: r.lastProbe,
        output: r.process?.recentOutput(),
      });
    }, this.service.replicas.startTimeoutMs);
    r.startTimer.unref();
    this.health.pollReadiness(r, 0);
  }

  /** The child process exited (or could not be spawned). */
  private onExit(r: ManagedReplica, exit: ProcessExit): void {
    const detail: Record<string, unknown> = { code: exit.code, signal: exit.signal };
    if (exit.error !== undefined) detail['error'] = exit.error.message;
    switch (r.state) {
      case 'starting':
      case 'ready':
      case 'unreachable':
        detail['output'] = r.process?.recentOutput();
        this.owner.transition(r, 'failed', r.state === 'starting' ? 'exited while starting' : 'exited', detail);
        break;
      case 'draining':
        this.owner.transition(r, 'stopped', 'exited', detail);
        break;
      case 'failed':
      case 'stopped':
        // Killed after a start timeout: its place is free now.
        this.log.info({ service: this.service.slug, replica: r.id, ...detail }, 'replica process exited');
        this.owner.forget(r);
        break;
    }
  }
}
