// Which cell set of the limit table (limit-control.ts) each limited token has: assigned by the control
// plane at start and on each reload, and kept for a token that stays (same service, same name), so
// a reload does not reset what the token has used. A token whose limits come from its service is
// limited as much as one with its own.
//
// A reload never moves counts from one token to another: the cell set of a token it removes (or
// renames: a new name is a new token) retires. Its token's running requests end in it, and a
// thread that has not applied the reload yet still admits into it; it goes to another token (and
// is cleared, its generation bumped) only once every data plane thread applied the reload (the
// table's `applied`) and nothing holds a place or a reservation of it (`idle`).
import type { Config, LimitsConfig, ServiceConfig, TokenConfig } from '../config/types.js';
import type { LimitControl, LimitUse } from './limit-control.js';
import { LIMIT_NAMES } from './limit-layout.js';

/** The limits that apply to a token of `service`: its own, else the service's; undefined: none. */
export function effectiveLimits(service: Pick<ServiceConfig, 'limits'>, token: TokenConfig): LimitsConfig | undefined {
  const limits = token.limits ?? service.limits;
  if (limits === undefined) return undefined;
  for (const name of LIMIT_NAMES) if (limits[name] !== undefined) return limits;
  return undefined;
}

/** What has tokens, in the order of the cell sets `assign` returns: the services, then the routers. */
function tokenHolders(config: Config): readonly Pick<ServiceConfig, 'slug' | 'tokens' | 'limits'>[] {
  return config.routers === undefined ? config.services : [...config.services, ...config.routers];
}

/** The limited tokens of a config: how many cell sets a table needs (with room for reloads). */
export function limitedTokens(config: Config): number {
  let n = 0;
  for (const service of tokenHolders(config)) for (const token of service.tokens) if (effectiveLimits(service, token) !== undefined) n++;
  return n;
}

/** A limited token's cell set, as /status and /metrics read it. */
export interface LimitedToken {
  service: string;
  token: string;
  cell: number;
  limits: LimitsConfig;
}

/** A cell set whose token a reload removed: its last token, and the reload it retired with. */
interface Retiring {
  key: string;
  token: LimitedToken;
  reload: number;
}

export class LimitCells {
  private readonly byKey = new Map<string, LimitedToken>();
  private readonly free: number[] = [];
  private readonly retiring: Retiring[] = [];
  /** The assignments made so far: 1 at start, one more per reload (what the threads report as applied). */
  reload = 0;

  constructor(private readonly table: LimitControl) {
    for (let cell = table.cellSets - 1; cell >= 0; cell--) this.free.push(cell);
  }

  /**
   * Assigns cell sets to the limited tokens of `config` (the next reload: `reload` counts it); per
   * service (config order), then per router (a router's tokens are limited as a service's), per
   * token, its cell set or -1. Throws when the table has no room left (the reload is then refused,
   * nothing changed).
   */
  assign(config: Config): number[][] {
    this.release();
    const next = new Map<string, LimitedToken>();
    const wanted: { key: string; entry: Omit<LimitedToken, 'cell'> }[] = [];
    const holders = tokenHolders(config);
    for (const service of holders) {
      for (const token of service.tokens) {
        const limits = effectiveLimits(service, token);
        if (limits === undefined) continue;
        const key = `${service.slug}\u0000${token.name}`;
        const kept = this.byKey.get(key);
        if (kept !== undefined) next.set(key, { ...kept, limits });
        else wanted.push({ key, entry: { service: service.slug, token: token.name, limits } });
      }
    }
    if (wanted.length > this.free.length) {
      throw new Error(`the limit table has room for ${this.table.cellSets} limited tokens (${this.retiring.length} still in use by removed ones); restart to apply more`);
    }
    this.reload += 1;
    for (const [key, t] of this.byKey) if (!next.has(key)) this.retiring.push({ key, token: t, reload: this.reload });
    for (const { key, entry } of wanted) {
      const cell = this.free.pop()!;
      this.table.clear(cell);
      next.set(key, { ...entry, cell });
    }
    this.byKey.clear();
    for (const [key, t] of next) this.byKey.set(key, t);
    return holders.map((service) => service.tokens.map((token) => this.byKey.get(`${service.slug}\u0000${token.name}`)?.cell ?? -1));
  }

  /** Retired cell sets that every thread has let go of (their reload applied everywhere, nothing held) become free. */
  release(): void {
    for (let i = this.retiring.length - 1; i >= 0; i--) {
      const r = this.retiring[i]!;
      if (!this.table.appliedEverywhere(r.reload) || !this.table.idle(r.token.cell)) continue;
      this.retiring.splice(i, 1);
      this.free.push(r.token.cell);
    }
  }

  /** Every limited token now, and the retiring ones that no token now has the name of (the shared store syncs them until they are idle). */
  synced(): LimitedToken[] {
    const out = [...this.byKey.values()];
    for (const r of this.retiring) if (!this.byKey.has(r.key)) out.push(r.token);
    return out;
  }

  /** Every limited token now. */
  tokens(): LimitedToken[] {
    return [...this.byKey.values()];
  }

  /** The series of sluice_rate_limited_total: one per limited token and limit it has. */
  refusals(): { service: string; token: string; limit: string; value: number }[] {
    const out: { service: string; token: string; limit: string; value: number }[] = [];
    for (const t of this.byKey.values()) {
      LIMIT_NAMES.forEach((limit, i) => {
        if (t.limits[limit] !== undefined) out.push({ service: t.service, token: t.token, limit, value: this.table.refusals(t.cell, i) });
      });
    }
    return out;
  }

  /** A worker thread died: what its requests held of the limits is given back (LimitControl.reclaim). */
  reclaim(thread: number): number {
    return this.table.reclaim(thread);
  }

  /** Every limited token's use now (/status). */
  usage(): { service: string; token: string; use: LimitUse }[] {
    return [...this.byKey.values()].map((t) => ({ service: t.service, token: t.token, use: this.table.use(t.cell, t.limits) }));
  }

  /** Keeps idle cell sets' arrival times within the table's range (LimitControl.sweep); frees retired cell sets now idle. */
  sweep(): void {
    this.table.sweep([...this.byKey.values()].map((t) => t.cell));
    this.release();
  }
}
