// The shared store of the limits per caller (`limits.store: redis://…`,
// docs/architecture.md#the-shared-store): the one Redis client of the gateway, on the main thread.
// It tops up what the limit table holds of each limited token's counts in the store: requests
// leased of requestsPerMinute, slots of `concurrent`, the tokens other gateways counted. Worker
// threads never talk to it: a token whose lease runs low rings the table's doorbell, and each
// token is synced every LIMIT_STORE_SYNC_MS besides (tokens settled, slots given back, a stale
// lease returned). Down (a failed or unanswered command, a lost connection, credentials refused):
// the table follows `onStoreDown` until a sync succeeds again; the client reconnects by itself.
// `rediss://`: over TLS (limits/store/limit-store-tls.ts: the CA and client certificate files); a
// failed handshake is an outage like refused credentials.
// The password (in the URL or its file) goes only to the client: logs show the store as
// `redis://user:***@host:port/db` (docs/security.md#the-limit-stores-password).
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import type { Logger } from '../../log/logger.js';
import type { LimitedToken } from '../limit-cells.js';
import { leaseShare } from '../limit-table.js';
import { StoreCells } from './store-cells.js';
import { DAY_MS, dayOf, monthOf, monthStartAt } from '../calendar-window.js';
import { LIMIT_STORE_COMMAND_MS, LIMIT_STORE_GONE_MS, LIMIT_STORE_LEASE_MS } from '../../tunables.js';

import { settlesWithin } from '../../time/bounded-wait.js';
import { LEAVE_SCRIPT, SYNC_SCRIPT } from './limit-store-script.js';
import { parseRedisUrl, readStorePassword, shownTarget } from '../../config/redis-store.js';
import type { CertificatesInUse } from '../../metrics/certificate-metrics.js';
import { StoreTls, type StoreTlsFiles, tlsFailure } from './limit-store-tls.js';

/** How long a day's or a month's key outlives its window in the store (ms). */
const CALENDAR_KEEP_MS = 120_000;

/** How often the control plane syncs every limited token with the shared store (tokens counted, slots given back, stale leases returned). */
const LIMIT_STORE_SYNC_MS = 100;

/** What the gateway knows of one limited token's part in the store. */
interface TokenSync {
  readonly key: string;
  /** A sync of it is under way; `again`: the requests that asked for a top-up meanwhile. */
  busy: boolean;
  again: number;
  /** When its lease was last granted (performance.now()). */
  grantedAt: number;
  /** Settled tokens already added to the store, by Unix second. */
  readonly pushed: Map<number, number>;
}

/** The TLS files (with rediss://): `limits.storeCaFile`, `storeCertFile`, `storeKeyFile`, read now and by `reloadFiles` (SIGHUP). */
export interface LimitStoreOptions extends StoreTlsFiles {
  /** `limits.store`, valid (config/redis-store.ts). */
  url: string;
  /** `limits.storePasswordFile`: read now and by `reloadFiles` (SIGHUP). */
  passwordFile?: string | undefined;
  prefix: string;
  buffer: SharedArrayBuffer;
  /** The limited tokens now (limits/limit-cells.ts). */
  tokens: () => readonly LimitedToken[];
  logger: Logger;
  /** Told of the CA and client certificate in use (with rediss://), at start and after a reload that changed them. */
  certificates?: CertificatesInUse | undefined;
}

/** The longest wait between two attempts of a store that is down (a reconnect, or a PING of a connected store that refused). */
const RETRY_MAX_MS = 1000;

/** The Redis errors that say the store refused who the gateway is: its code, for the log. */
function authFailure(err: unknown): string | undefined {
  const message = err instanceof Error ? err.message : '';
  const code = /^(WRONGPASS|NOAUTH|NOPERM)\b/.exec(message)?.[1];
  if (code !== undefined) return code;
  // A password given to a Redis without one: `ERR AUTH <password> called without any password configured…`.
  return /^ERR\b.*\bAUTH\b/.test(message) ? 'ERR' : undefined;
}

export class LimitStore {
  /** Failures of the store: failed or unanswered commands, lost connections (sluice_limit_store_errors_total). */
  errors = 0;
  private readonly client;
  private readonly cells: StoreCells;
  private readonly gateway = randomUUID();
  private readonly syncs = new Map<number, TokenSync>();
  private readonly timer: NodeJS.Timeout;
  /** The store as logs show it: its password replaced by `***`. */
  private readonly shown: string;
  /** What the client authenticates with at each connection (the password file's content changes on SIGHUP). */
  private credentials: { username?: string; password?: string };
  /** With rediss://: what the client trusts and presents (refilled on SIGHUP). */
  private readonly tls: StoreTls | undefined;
  private up = false;
  /** A PING of a connected store that failed is being tried again. */
  private probing = false;
  private probedAt = 0;
  /** Resolves when the store first answers (the gateway waits a bounded time for it before listening). */
  readonly ready: Promise<void>;
  private resolveReady: () => void = () => {};
  /** An outage was logged (which kind) and its end not yet. */
  private downLogged: 'unreachable' | 'auth' | 'tls' | undefined;
  private closed = false;

  constructor(private readonly options: LimitStoreOptions) {
    this.cells = new StoreCells(options.buffer);
    this.ready = new Promise((resolve) => {
      this.resolveReady = resolve;
    });
    const target = parseRedisUrl(options.url);
    if ('problem' in target) throw new Error(`limits.store ${target.problem}`); // the config was validated
    let password = target.password;
    if (options.passwordFile !== undefined) {
      try {
        password = readStorePassword(options.passwordFile);
      } catch (err) {
        // Read by the config's validation a moment ago: gone or changed since.
        throw new Error(`limits.storePasswordFile ${options.passwordFile}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    this.credentials = { ...(target.username === undefined ? {} : { username: target.username }), ...(password === undefined ? {} : { password }) };
    this.shown = shownTarget(target, password !== undefined);
    if (target.tls === true) this.tls = new StoreTls(options, this.shown, options.logger, options.certificates);
    const socket = { host: target.host, port: target.port, connectTimeout: LIMIT_STORE_COMMAND_MS, reconnectStrategy: (retries: number) => Math.min(RETRY_MAX_MS, 50 * 2 ** Math.min(retries, 5)) };
    this.client = createClient({
      database: target.db,
      disableOfflineQueue: true,
      commandOptions: { timeout: LIMIT_STORE_COMMAND_MS },
      socket: this.tls === undefined ? socket : { ...socket, ...this.tls.socketOptions() },
      // Asked at each connection: a password reloaded from its file is used from the next one.
      ...(password === undefined ? {} : { credentialsProvider: { type: 'async-credentials-provider' as const, credentials: () => Promise.resolve(this.credentials) } }),
    });
    this.client.on('error', (err: unknown) => this.failed(err));
    // Connected (again): up once it answers, then every token synced.
    this.client.on('ready', () => this.probe());
    this.client.connect().catch((err: unknown) => this.failed(err));
    this.timer = setInterval(() => {
      if (this.up) this.syncAll();
      // Connected but refusing PING (NOPERM, a store still loading): asked again, as a reconnect would be.
      else if (this.client.isReady && !this.closed && performance.now() - this.probedAt >= RETRY_MAX_MS) this.probe();
    }, LIMIT_STORE_SYNC_MS).unref();
    void this.listen();
  }

  /** Up once the store answers a PING, then every token synced. */
  private probe(): void {
    if (this.probing) return;
    this.probing = true;
    this.probedAt = performance.now();
    this.client
      .ping()
      .then(
        () => {
          this.reachable();
          this.syncAll();
        },
        (err: unknown) => this.failed(err),
      )
      .finally(() => {
        this.probing = false;
      });
  }

  /** SIGHUP: the password and TLS files read again, each used from the next connection. */
  reloadFiles(): void {
    this.reloadPassword();
    this.tls?.reload();
  }

  /**
   * The password file read again; a new password is used from the next connection (the one open
   * stays authenticated). An unreadable file keeps the password the store has.
   */
  private reloadPassword(): void {
    const file = this.options.passwordFile;
    if (file === undefined) return;
    let password: string;
    try {
      password = readStorePassword(file);
    } catch (err) {
      this.options.logger.error({ store: this.shown, file, reason: err instanceof Error ? err.message : String(err) }, 'limit store password not reloaded');
      return;
    }
    if (password === this.credentials.password) return;
    this.credentials = { ...this.credentials, password };
    this.options.logger.info({ store: this.shown, file }, 'limit store password reloaded');
  }

  /** Answers the doorbell: syncs each token whose lease a thread found low or empty. */
  private async listen(): Promise<void> {
    while (!this.closed) {
      // The bell's count before the look: a ring during the look ends the next wait at once.
      const seen = this.cells.bell();
      for (const t of this.options.tokens()) {
        const need = this.cells.takeNeed(t.cell);
        if (need > 0) this.sync(t, need);
      }
      await this.cells.ring(seen);
    }
  }

  private syncAll(): void {
    for (const t of this.options.tokens()) {
      this.cells.clearPastExhausted(t.cell);
      this.sync(t, this.cells.takeNeed(t.cell));
    }
  }

  private stateOf(t: LimitedToken): TokenSync {
    const key = `${this.options.prefix}${encodeURIComponent(t.service)}:${encodeURIComponent(t.token)}`;
    let s = this.syncs.get(t.cell);
    if (s === undefined || s.key !== key) {
      s = { key, busy: false, again: 0, grantedAt: 0, pushed: new Map() };
      this.syncs.set(t.cell, s);
    }
    return s;
  }

  /** One round trip for token `t`: what it gives back, settled and reserves in, its grants out. */
  private sync(t: LimitedToken, need: number): void {
    const s = this.stateOf(t);
    if (s.busy) {
      s.again += need;
      return;
    }
    const { requestsPerMinute: rpm = 0, concurrent = 0, tokensPerMinute: tpm = 0, tokensPerDay: perDay = 0, tokensPerMonth: perMonth = 0 } = t.limits;
    const cell = t.cell;
    const share = leaseShare(t.limits.requestsPerMinute);
    // A lease older than LIMIT_STORE_LEASE_MS goes back: what bounds the overshoot.
    const back = rpm > 0 && this.cells.lease(cell) > 0 && performance.now() - s.grantedAt > LIMIT_STORE_LEASE_MS ? this.cells.takeLease(cell) : 0;
    // A share, or as many as asked at once (a burst on an empty lease).
    const want = rpm > 0 && need > 0 ? Math.max(share, need) : 0;
    let slots = 0;
    if (concurrent > 0) {
      const held = this.cells.slots(cell);
      const inflight = this.cells.inflight(cell);
      // Asked for: one more place at a time beyond those in use; otherwise the idle ones go back.
      const target = need > 0 ? Math.max(held, inflight + need) : inflight;
      if (target < held) {
        // The places given back are free in the store: "full" from the last sync no longer holds,
        // and is cleared first, so a request that sees the lowered slots asks the store for one
        // instead of a 429 while nothing of the token runs (a thread reads slots, then full).
        this.cells.setFull(cell, false);
        slots = Math.max(target, this.cells.setSlots(cell, target));
      } else slots = target;
    }
    const settled: string[] = [];
    if (tpm > 0) {
      const now = this.cells.settled(cell);
      for (const [second, n] of now) {
        const delta = n - (s.pushed.get(second) ?? 0);
        if (delta > 0) settled.push(String(second), String(delta));
      }
      s.pushed.clear();
      for (const [second, n] of now) s.pushed.set(second, n);
    }
    const tokens = tpm > 0 || perDay > 0 || perMonth > 0;
    if (rpm === 0 && concurrent === 0 && !tokens) return;
    if (need === 0 && want === 0 && back === 0 && concurrent === 0 && !tokens) return; // nothing to say
    s.busy = true;
    // The calendar windows by this gateway's clock: the day and the month it settles into now.
    const nowMs = Date.now();
    const day = dayOf(nowMs);
    const month = monthOf(nowMs);
    const calendar = [
      String(perDay), String(day), String(perDay > 0 ? this.cells.settledIn(cell, day, false) : 0), String((day + 1) * DAY_MS + CALENDAR_KEEP_MS),
      String(perMonth), String(month), String(perMonth > 0 ? this.cells.settledIn(cell, month, true) : 0), String(monthStartAt(month + 1) + CALENDAR_KEEP_MS),
    ];
    const args = [this.gateway, String(LIMIT_STORE_GONE_MS), String(rpm), String(want), String(back), String(concurrent), String(slots), String(tpm), String(this.cells.reserved(cell)), ...calendar, ...settled];
    this.client
      .eval(SYNC_SCRIPT, { keys: [s.key], arguments: args })
      .then((reply) => {
        const [granted, waitMs, held, counted, room, left, dayCounted, monthCounted] = reply as number[];
        if (this.stateOf(t) === s) {
          if (rpm > 0) this.cells.setLeft(cell, left!);
          this.cells.addLease(cell, granted!);
          if (granted! > 0) s.grantedAt = performance.now();
          if (want > 0) this.cells.setExhausted(cell, granted! < want ? waitMs! : 0);
          if (concurrent > 0) {
            this.cells.setRoom(cell, room!);
            this.cells.setSlots(cell, held!);
            this.cells.setFull(cell, room! <= held!);
          }
          if (tpm > 0) this.cells.setRemote(cell, counted! - sum(s.pushed));
          if (perDay > 0) this.cells.setRemoteIn(cell, day, false, dayCounted!);
          if (perMonth > 0) this.cells.setRemoteIn(cell, month, true, monthCounted!);
        }
        this.reachable();
      })
      .catch((err: unknown) => {
        // What was pushed may not be in the store: it is pushed again with the next sync.
        s.pushed.clear();
        this.failed(err);
      })
      .finally(() => {
        s.busy = false;
        this.cells.wake(cell);
        if (s.again > 0) {
          const again = s.again;
          s.again = 0;
          if (this.up) this.sync(t, again);
        }
      });
  }

  private reachable(): void {
    if (this.up) return;
    this.up = true;
    // What the store said before the outage may be gone with it (a restart without persistence).
    for (const t of this.options.tokens()) {
      this.cells.setExhausted(t.cell, 0);
      this.cells.setFull(t.cell, false);
      this.cells.setLeft(t.cell, 0);
      this.cells.setRoom(t.cell, 0);
    }
    this.cells.setUp(true);
    this.options.logger.info({ store: this.shown }, 'limit store reachable');
    this.resolveReady();
    this.downLogged = undefined;
  }

  private failed(err: unknown): void {
    if (this.closed) return;
    this.errors++;
    this.up = false;
    this.cells.setUp(false);
    for (const t of this.options.tokens()) this.cells.wake(t.cell);
    // One line per outage, and another when its kind changes (a store back with other credentials).
    const auth = authFailure(err);
    const tls = auth === undefined ? tlsFailure(err) : undefined;
    const kind = auth !== undefined ? 'auth' : tls !== undefined ? 'tls' : 'unreachable';
    if (this.downLogged === kind) return;
    this.downLogged = kind;
    const message = this.withoutPassword(err instanceof Error ? err.message : String(err));
    if (auth !== undefined) this.options.logger.error({ store: this.shown, code: auth, err: message }, 'limit store authentication failed');
    else if (tls !== undefined) this.options.logger.error({ store: this.shown, code: tls, err: message }, 'limit store TLS failed');
    else this.options.logger.warn({ store: this.shown, err: message }, 'limit store unreachable');
  }

  /** A message with the password, should a server or library ever quote it, replaced by `***`. */
  private withoutPassword(message: string): string {
    const password = this.credentials.password;
    return password === undefined ? message : message.split(password).join('***');
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    if (this.up) {
      // Its places, reservations and unused leases go back at once, for the gateways that stay
      // (or this one, restarted). Bounded: a store that does not answer leaves them to expire.
      const leaving = this.options.tokens().map((t) => {
        const rpm = t.limits.requestsPerMinute ?? 0;
        const back = rpm > 0 ? this.cells.takeLease(t.cell) : 0;
        return this.client.eval(LEAVE_SCRIPT, { keys: [this.stateOf(t).key], arguments: [this.gateway, String(rpm), String(back)] });
      });
      await settlesWithin(Promise.allSettled(leaving), LIMIT_STORE_COMMAND_MS);
    }
    this.cells.setUp(false);
    this.cells.knock(); // the doorbell's wait ends, and its loop
    try {
      await this.client.close();
    } catch {
      this.client.destroy();
    }
  }
}

function sum(m: ReadonlyMap<number, number>): number {
  let n = 0;
  for (const v of m.values()) n += v;
  return n;
}
