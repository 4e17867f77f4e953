// A pool as `/status` and the overview page show it (docs/operations.md#pools): its units and who
// holds each, and the services whose start waits for units, first served first. The control
// plane's pools (src/control/pools/unit-pool.ts) give this type as their snapshot.
export interface PoolStatus {
  name: string;
  size: number;
  used: number;
  free: number;
  /** Each unit: the service and replica holding it (null: free), and whether that replica is stopping (its units come back at its exit). */
  units: { unit: number; service: string | null; replica: string | null; stopping: boolean }[];
  /** Services whose start waits for units: the units it needs, the priority of its first request and how long that has waited. */
  waiting: { service: string; units: number; priority: number; waitingMs: number }[];
  /** Replicas stopped for another service's start so far, by service. */
  evictions: Record<string, number>;
}
