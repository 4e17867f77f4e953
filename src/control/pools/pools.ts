// The gateway's pools (`pools:` in the config), built once at start: one UnitPool each, shared by
// the services that name it (kinds/launched/ takes units from them). A reload (SIGHUP) changes
// none of them: a pool's size, and a service's pool, take effect on restart.
import type { PoolConfig } from '../../config/types.js';
import type { Logger } from '../../log/logger.js';
import type { PoolReading } from '../../metrics/pool-metrics.js';
import { type PoolSnapshot, UnitPool } from './unit-pool.js';

export class Pools {
  readonly byName: ReadonlyMap<string, UnitPool>;

  constructor(pools: readonly PoolConfig[], log: Logger) {
    this.byName = new Map(pools.map((p) => [p.name, new UnitPool(p.name, p.size, log)]));
  }

  /** For the metrics, at a scrape. */
  readings(): PoolReading[] {
    return [...this.byName.values()].map((p) => ({ name: p.name, size: p.size, used: p.used, evictions: p.evictions() }));
  }

  /** For `/status` and the overview page. */
  snapshot(): PoolSnapshot[] {
    return [...this.byName.values()].map((p) => p.snapshot());
  }

  /** The gateway closes: no more grants. */
  close(): void {
    for (const pool of this.byName.values()) pool.close();
  }
}
