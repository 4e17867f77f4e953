// A child of bench/hostile-metrics.ts: one replica of test/helpers/hostile-metrics.ts on a free
// port, in its own process so that serving megabytes does not slow the measuring client.
//   BENCH_REPLICA_MODE      line | small (see the helper)
//   BENCH_REPLICA_BYTES     the line's size
//   BENCH_REPLICA_DELAY_MS  how long its other requests take
import { type HostileMode, startHostileReplica } from '../test/helpers/hostile-metrics.js';
import { announceReady, exitOnStop } from './lib/child-side.js';
import { choiceEnv, intEnv } from './lib/settings.js';

const mode: HostileMode = choiceEnv('BENCH_REPLICA_MODE', 'small', ['line', 'small'] as const);
const replica = await startHostileReplica('bench', mode, intEnv('BENCH_REPLICA_BYTES', 7.5 * 1024 * 1024, 1024, 64 * 1024 * 1024));
replica.delayMs = intEnv('BENCH_REPLICA_DELAY_MS', 0, 0, 60_000);
exitOnStop(() => replica.close());
announceReady(Number(new URL(replica.url).port));
