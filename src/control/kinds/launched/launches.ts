// Launched replicas (`replicas.command`): the policy of their kind. When to start one, starting it
// through its source (a child process), what its process's exit means, and idle stops. The state
// machine itself is ServiceControl's (src/control/service/service-control.ts); this class only
// decides and reports through its host.
//
// - Scaling: a replica is started while the queue holds more requests than the replicas already
//   starting will take (`starting × concurrency`; with unlimited concurrency one starting replica
//   takes them all) and fewer than `max` replicas hold a place, or while fewer than `min` are live.
//   A place is held from the moment a replica is created (so a burst of 200 on a cold service with
//   max 1 starts exactly one, whichever workers saw them) until its process has exited (a draining
//   or killed process still holds memory, GPU included, so it still counts toward `max`).
// - Starts wait out the backoff of failed ones (src/control/service/tuning.ts `StartBackoff`).
// - A replica that is not ready within `startTimeoutMs` fails (its process is then stopped).
// - A cold service queues; a ready replica is not probed (its exit says enough); entering
//   `draining` or `failed` stops its process, and its exit lets go of its place.
// - With `replicas.pool`, a replica starts only when the pool hands its start units
//   (pool-seats.ts, src/control/pools/unit-pool.ts): `demandChanged` asks the pool, which calls
//   back when units are free; `{units}` in the command or env becomes the indices it holds, until
//   its process has exited.
import type { ReplicaKindPolicy, ReplicaHost } from '../../service/kind-policy.js';
import type { ManagedReplica } from '../../service/replica.js';
import type { ProcessExit, ReplicaProcess } from '../../sources/replica-process.js';
import type { ReplicaSource } from '../../sources/source.js';
import type { ReplicaStateName } from '../../../replicas/states.js';
import type { UnitPool } from '../../pools/unit-pool.js';
import { IdleStops } from './idle.js';
import { PoolSeats } from './pool-seats.js';

export class Launches implements ReplicaKindPolicy {
  readonly queuesForColdStart = true;
  readonly probesWhenReady = false;
  readonly panicFallback = false;

  private backoffTimer: NodeJS.Timeout | undefined = undefined;
  /** Launches in progress; `close()` awaits them. */
  private readonly pending = new Set<Promise<void>>();
  /** The process of each replica, from its spawn until its exit has been handled. */
  private readonly processes = new Map<ManagedReplica, ReplicaProcess>();
  /** `startTimeoutMs` of each placed replica still `starting`. */
  private readonly startTimers = new Map<ManagedReplica, NodeJS.Timeout>();
  private readonly idle: IdleStops;
  /** The service's place in its pool (`replicas.pool`), if it has one. */
  private readonly seats: PoolSeats | undefined;

  constructor(
    private readonly host: ReplicaHost,
    private readonly source: ReplicaSource,
    pool?: UnitPool,
  ) {
    this.idle = new IdleStops(host);
    this.seats = pool === undefined ? undefined : new PoolSeats(host, pool, { wanted: () => this.wanted(), start: (why, units) => this.startOne(why, units) });
  }

  start(): void {
    // Nothing runs yet: the first demandChanged() starts `min` replicas.
    this.seats?.pool.join(this.seats);
  }

  /** Starts replicas while the queue or `min` needs them, within `max` and the backoff (on a pool: when it hands out units). */
  demandChanged(): void {
    if (this.seats !== undefined) {
      this.seats.pool.settle();
      return;
    }
    for (let why = this.wanted(); why !== undefined; why = this.wanted()) if (this.startOne(why, undefined) === undefined) return;
  }

  /** Why a replica should start now (`queued requests`, `min`); undefined: none should, or not yet (the backoff: looked at again then). */
  private wanted(): string | undefined {
    if (!this.host.accepting) return undefined;
    const { min, max, concurrency } = this.host.service.replicas;
    const { places, starting, live, queued } = this.host.counts();
    if (places >= max) return undefined;
    const startingTakes = starting === 0 ? 0 : concurrency === 0 ? Infinity : starting * concurrency;
    const forQueue = queued > startingTakes;
    if (!forQueue && live >= min) return undefined;
    const wait = this.host.backoffWaitMs();
    if (wait > 0) {
      this.lookAgain(wait);
      return undefined;
    }
    return forQueue ? 'queued requests' : 'min';
  }

  /** Starts one replica (holding `units` of the pool); undefined when every slot still has requests of a replica that is gone. */
  private startOne(why: string, units: readonly number[] | undefined): ManagedReplica | undefined {
    const r = this.host.create();
    if (r === undefined) {
      this.lookAgain(0);
      return undefined;
    }
    const launching = this.launch(r, why, units);
    this.pending.add(launching);
    void launching.finally(() => this.pending.delete(launching));
    return r;
  }

  /** In a backoff, or no slot free: look again soon. */
  private lookAgain(waitMs: number): void {
    if (this.backoffTimer !== undefined) return;
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = undefined;
      this.demandChanged();
    }, Math.max(10, Math.ceil(waitMs)));
    this.backoffTimer.unref();
  }

  entered(r: ManagedReplica, from: ReplicaStateName, to: ReplicaStateName, now: number): void {
    if (from === 'starting') this.clearStartTimer(r);
    if (from === 'ready') this.idle.disarm(r);
    switch (to) {
      case 'ready':
        if (from === 'starting') {
          this.host.events?.coldStart(this.host.service.slug, r.id, now - r.createdAt);
          this.host.startMeasured(now - r.createdAt);
        }
        this.idle.arm(r);
        break;
      case 'draining':
        if (this.processGone(r)) this.host.transition(r, 'stopped', 'no process to stop');
        else {
          this.seats?.stopping(r);
          void this.stop(r); // the exit event moves it to `stopped`
        }
        break;
      case 'failed':
        if (this.processGone(r)) {
          this.seats?.released(r);
          this.host.forget(r);
        } else {
          this.seats?.stopping(r);
          void this.stop(r); // start timeout: the exit event forgets it
        }
        break;
      case 'stopped':
        // Reached only once its process has exited (or none was spawned): its units are free.
        this.seats?.released(r);
        break;
      default:
        break;
    }
  }

  heldOut(): boolean {
    return false;
  }

  unloadIdle(): { stopped: string[]; kept: string[] } {
    return this.idle.stopAllNow();
  }

  pid(r: ManagedReplica): number | undefined {
    return this.processes.get(r)?.pid;
  }

  /** No more starts (the service drains); launches in progress go on. */
  drain(): void {
    if (this.backoffTimer !== undefined) clearTimeout(this.backoffTimer);
    this.backoffTimer = undefined;
  }

  async close(graceMs: number): Promise<void> {
    this.idle.close();
    for (const r of [...this.startTimers.keys()]) this.clearStartTimer(r);
    const exits: Promise<unknown>[] = [];
    for (const p of this.processes.values()) if (!p.hasExited) exits.push(p.stop(graceMs));
    await Promise.all(exits);
    await Promise.all([...this.pending]);
  }

  private processGone(r: ManagedReplica): boolean {
    const p = this.processes.get(r);
    return p === undefined || p.hasExited;
  }

  private stop(r: ManagedReplica): Promise<unknown> {
    return this.processes.get(r)?.stop(this.host.tuning.stopGraceMs) ?? Promise.resolve();
  }

  private clearStartTimer(r: ManagedReplica): void {
    const timer = this.startTimers.get(r);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.startTimers.delete(r);
  }

  private async launch(r: ManagedReplica, why: string, units: readonly number[] | undefined): Promise<void> {
    const { service, log } = this.host;
    let started;
    try {
      started = await this.source.start({
        id: r.id,
        why,
        units,
        abandoned: () => r.state !== 'starting',
        onExit: (exit, process) => this.onExit(r, exit, process),
      });
    } catch (err) {
      if (r.state !== 'starting') return; // closed meanwhile
      log.error({ service: service.slug, replica: r.id, err }, 'replica start failed');
      this.host.transition(r, 'failed', 'start failed');
      return;
    }
    if (!started.process.hasExited) this.processes.set(r, started.process);
    if (r.state !== 'starting') {
      // Closed (or failed) while the process was being spawned: it must not outlive the service.
      await started.process.stop(this.host.tuning.stopGraceMs);
      return;
    }
    this.host.place(r, started.endpoint);
    const timer = setTimeout(() => {
      this.startTimers.delete(r);
      if (r.state !== 'starting') return;
      this.host.transition(r, 'failed', 'start timeout', {
        startTimeoutMs: service.replicas.startTimeoutMs,
        lastProbe: r.lastProbe,
        output: this.processes.get(r)?.recentOutput(),
      });
    }, service.replicas.startTimeoutMs);
    timer.unref();
    this.startTimers.set(r, timer);
    this.host.health.pollReadiness(r, 0);
  }

  /** The child process exited (or could not be spawned). */
  private onExit(r: ManagedReplica, exit: ProcessExit, process: ReplicaProcess): void {
    this.processes.set(r, process);
    const detail: Record<string, unknown> = { code: exit.code, signal: exit.signal };
    if (exit.error !== undefined) detail['error'] = exit.error.message;
    switch (r.state) {
      case 'starting':
      case 'ready':
      case 'unreachable':
        detail['output'] = process.recentOutput();
        this.host.transition(r, 'failed', r.state === 'starting' ? 'exited while starting' : 'exited', detail);
        break;
      case 'draining':
        this.host.transition(r, 'stopped', 'exited', detail);
        break;
      case 'failed':
      case 'stopped':
        // Killed after a start timeout: its place (and its units) are free now.
        this.host.log.info({ service: this.host.service.slug, replica: r.id, ...detail }, 'replica process exited');
        this.seats?.released(r);
        this.host.forget(r);
        break;
    }
    this.processes.delete(r);
  }
}
