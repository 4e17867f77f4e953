// The pools' metrics (docs/operations.md#metrics): read from the pools at each scrape, so a grant,
// a release or an eviction costs nothing here.
//   sluice_pool_units{pool,state="used"|"free"}      units held by a replica (until its process exits), and free
//   sluice_pool_evictions_total{pool,service}        idle replicas stopped for another service's start
import { Counter, Gauge, type Registry } from 'prom-client';

/** One pool as the metrics read it. */
export interface PoolReading {
  name: string;
  size: number;
  used: number;
  /** Evictions so far, by the service whose replica was stopped (every service of the pool, from 0). */
  evictions: ReadonlyMap<string, number>;
}

export function registerPoolMetrics(registry: Registry, read: () => readonly PoolReading[]): void {
  new Gauge({
    name: 'sluice_pool_units',
    help: 'Units of each pool held by a replica (state=used, from before its spawn until its process has exited) and free.',
    labelNames: ['pool', 'state'],
    registers: [registry],
    collect() {
      for (const pool of read()) {
        this.labels(pool.name, 'used').set(pool.used);
        this.labels(pool.name, 'free').set(pool.size - pool.used);
      }
    },
  });
  new Counter({
    name: 'sluice_pool_evictions_total',
    help: "Idle replicas stopped to free their pool's units for another service's start, by pool and the stopped replica's service.",
    labelNames: ['pool', 'service'],
    registers: [registry],
    collect() {
      this.reset();
      for (const pool of read()) for (const [service, n] of pool.evictions) this.labels(pool.name, service).inc(n);
    },
  });
}
