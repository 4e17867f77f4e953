// A data plane's open realtime sessions: one timer ticks their idle and total time-outs while any
// is open (none runs otherwise, and none per session), and a drain closes them all with `1001`.
import type { RelaySession } from './relay-session.js';

/** How often the open sessions' time-outs are looked at: a session ends at most this much late. */
const TICK_MS = 100;

export class OpenSessions {
  private readonly open = new Set<RelaySession>();
  private timer: NodeJS.Timeout | undefined = undefined;

  add(session: RelaySession): void {
    this.open.add(session);
    if (this.timer === undefined) {
      this.timer = setInterval(this.tick, TICK_MS);
      this.timer.unref();
    }
  }

  delete(session: RelaySession): void {
    if (!this.open.delete(session) || this.open.size > 0 || this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The gateway drains: every open session is closed with `1001`. */
  drain(): void {
    for (const session of [...this.open]) session.drain();
  }

  private readonly tick = (): void => {
    const now = performance.now();
    for (const session of [...this.open]) session.tick(now);
  };
}
