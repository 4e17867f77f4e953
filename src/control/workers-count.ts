// How many data plane threads `workers` means (contract section 7: 0 = one per CPU).
import { availableParallelism } from 'node:os';

export function workerCount(configured: number): number {
  return configured > 0 ? configured : Math.max(1, availableParallelism());
}
