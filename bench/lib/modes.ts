// The benchmark's three modes and their sizes. `full` is what the committed results come from;
// `quick` shrinks every scenario to about a minute; `smoke` only proves that every process starts,
// gets measured and stops (tiny sizes, never installs anything). BENCH_* variables override.
import { intEnv, listEnv } from './settings.js';

const PEERS = ['direct', 'sluice-info', 'sluice-info-plain', 'sluice-warn', 'sluice-info-w2', 'nginx', 'haproxy', 'caddy', 'http-proxy', 'fastify-proxy', 'bare'] as const;
/**
 * Every peer; `sluice-other` (Sluice info from another build, BENCH_OTHER_GATEWAY), the limited
 * ones (`sluice-limits`: limits counted in-process; `sluice-limits-redis`: in a redis-server the run
 * starts), the router (`sluice-router`: through a router that reads each body's model) and the
 * other build's of these three (`sluice-other-…`), and the traced ones (`sluice-trace-1pct`,
 * `sluice-trace-all`: tracing on at sampleRatio 0.01 and 1, to a sink the run starts; `sluice-other-trace-all`, the other build's at 1) run only
 * when listed in BENCH_PEERS.
 */
const ALL_PEERS = [...PEERS, 'sluice-other', 'sluice-limits', 'sluice-limits-redis', 'sluice-router', 'sluice-other-limits', 'sluice-other-limits-redis', 'sluice-other-router', 'sluice-trace-1pct', 'sluice-trace-all', 'sluice-other-trace-all'] as const;
export type PeerId = (typeof ALL_PEERS)[number];

const SCENARIOS = ['throughput', 'ttfb', 'tokens', 'tokensFew', 'newStreams', 'slowReader', 'idleStreams', 'coldStart', 'uploads', 'heldUploads'] as const;
export type ScenarioId = (typeof SCENARIOS)[number];

export type Mode = 'full' | 'quick' | 'smoke';

export interface Settings {
  mode: Mode;
  peers: PeerId[];
  scenarios: ScenarioId[];
  rounds: number;
  connections: number;
  durationS: number;
  warmupS: number;
  ttfbRequests: number;
  /** The `tokens` scenario: this many streams at once, each of streamTokens tokens, one per tick. */
  streams: number;
  streamTokens: number;
  streamGapMs: number;
  /** The `tokensFew` scenario: fewer streams, faster ticks. */
  fewStreams: number;
  fewStreamTokens: number;
  fewStreamGapMs: number;
  /** The `newStreams` scenario: streams each on a new connection, started evenly over one stream's life. */
  newStreams: number;
  newStreamTokens: number;
  newStreamGapMs: number;
  /**
   * Short streams on new connections each relay gets before the rounds, so the rounds measure a
   * relay in service: V8 optimises code that runs once per stream only after a few thousand.
   */
  newStreamsWarmup: number;
  slowBytes: number;
  slowRateBytesPerS: number;
  slowPeers: PeerId[];
  idleStreams: number;
  coldRequests: number;
  coldStartupMs: number;
  /** The `uploads` scenario: sequential requests per framing, on these peers. */
  uploadRequests: number;
  uploadPeers: PeerId[];
  /** The `heldUploads` scenario: callers each holding this many bytes of a chunked body open, on these relays. */
  heldCallers: number;
  heldBytes: number;
  heldPeers: PeerId[];
  /** May the run install nginx, HAProxy and Caddy with apt when they are missing? */
  installPeers: boolean;
  /** Memory scenarios on a fresh process of each relay (full, quick) or on the rounds' ones (smoke: fewer starts). */
  freshRelays: boolean;
}

const MiB = 1024 * 1024;

const SIZES: Record<Mode, Omit<Settings, 'mode' | 'peers' | 'scenarios' | 'slowPeers' | 'uploadPeers' | 'heldPeers' | 'installPeers' | 'freshRelays'>> = {
  full: {
    rounds: 3,
    connections: 50,
    durationS: 5,
    warmupS: 2,
    ttfbRequests: 10_000,
    streams: 1_000,
    streamTokens: 30,
    streamGapMs: 100,
    fewStreams: 20,
    fewStreamTokens: 150,
    fewStreamGapMs: 20,
    newStreams: 1_000,
    newStreamTokens: 6,
    newStreamGapMs: 1_000,
    newStreamsWarmup: 5_000,
    slowBytes: 64 * MiB,
    slowRateBytesPerS: 4 * MiB,
    idleStreams: 1_000,
    coldRequests: 500,
    coldStartupMs: 300,
    uploadRequests: 20_000,
    heldCallers: 1_000,
    heldBytes: MiB,
  },
  quick: {
    rounds: 1,
    connections: 50,
    durationS: 2,
    warmupS: 1,
    ttfbRequests: 2_000,
    streams: 1_000,
    streamTokens: 15,
    streamGapMs: 100,
    fewStreams: 20,
    fewStreamTokens: 75,
    fewStreamGapMs: 20,
    newStreams: 300,
    newStreamTokens: 3,
    newStreamGapMs: 1_000,
    newStreamsWarmup: 3_000,
    slowBytes: 8 * MiB,
    slowRateBytesPerS: 4 * MiB,
    idleStreams: 1_000,
    coldRequests: 500,
    coldStartupMs: 300,
    uploadRequests: 10_000,
    heldCallers: 1_000,
    heldBytes: MiB,
  },
  smoke: {
    rounds: 1,
    connections: 4,
    durationS: 1,
    warmupS: 0,
    ttfbRequests: 20,
    streams: 10,
    streamTokens: 3,
    streamGapMs: 10,
    fewStreams: 2,
    fewStreamTokens: 3,
    fewStreamGapMs: 10,
    newStreams: 4,
    newStreamTokens: 2,
    newStreamGapMs: 10,
    newStreamsWarmup: 0,
    slowBytes: MiB,
    slowRateBytesPerS: 4 * MiB,
    idleStreams: 10,
    coldRequests: 20,
    coldStartupMs: 50,
    uploadRequests: 20,
    heldCallers: 4,
    heldBytes: 128 * 1024,
  },
};

export function settingsFor(mode: Mode): Settings {
  const d = SIZES[mode];
  return {
    mode,
    peers: listEnv<PeerId>('BENCH_PEERS', PEERS, ALL_PEERS),
    scenarios: listEnv<ScenarioId>('BENCH_SCENARIOS', SCENARIOS, SCENARIOS),
    rounds: intEnv('BENCH_ROUNDS', d.rounds, 1, 100),
    connections: intEnv('BENCH_CONNECTIONS', d.connections, 1, 10_000),
    durationS: intEnv('BENCH_DURATION_S', d.durationS, 1, 3_600),
    warmupS: intEnv('BENCH_WARMUP_S', d.warmupS, 0, 600),
    ttfbRequests: intEnv('BENCH_TTFB_REQUESTS', d.ttfbRequests, 1, 1_000_000),
    streams: intEnv('BENCH_STREAMS', d.streams, 1, 10_000),
    streamTokens: intEnv('BENCH_STREAM_TOKENS', d.streamTokens, 2, 100_000),
    streamGapMs: intEnv('BENCH_STREAM_GAP_MS', d.streamGapMs, 1, 60_000),
    fewStreams: intEnv('BENCH_FEW_STREAMS', d.fewStreams, 1, 10_000),
    fewStreamTokens: intEnv('BENCH_FEW_STREAM_TOKENS', d.fewStreamTokens, 2, 100_000),
    fewStreamGapMs: intEnv('BENCH_FEW_STREAM_GAP_MS', d.fewStreamGapMs, 1, 60_000),
    newStreams: intEnv('BENCH_NEW_STREAMS', d.newStreams, 1, 100_000),
    newStreamTokens: intEnv('BENCH_NEW_STREAM_TOKENS', d.newStreamTokens, 1, 10_000),
    newStreamGapMs: intEnv('BENCH_NEW_STREAM_GAP_MS', d.newStreamGapMs, 1, 60_000),
    newStreamsWarmup: intEnv('BENCH_NEW_STREAMS_WARMUP', d.newStreamsWarmup, 0, 100_000),
    slowBytes: intEnv('BENCH_SLOW_MIB', d.slowBytes / MiB, 1, 4_096) * MiB,
    slowRateBytesPerS: intEnv('BENCH_SLOW_MIB_PER_S', d.slowRateBytesPerS / MiB, 1, 1_024) * MiB,
    slowPeers: listEnv<PeerId>('BENCH_SLOW_PEERS', ['sluice-info', 'nginx'], ALL_PEERS),
    idleStreams: intEnv('BENCH_IDLE_STREAMS', d.idleStreams, 1, 10_000),
    coldRequests: intEnv('BENCH_COLD_REQUESTS', d.coldRequests, 1, 10_000),
    coldStartupMs: intEnv('BENCH_COLD_STARTUP_MS', d.coldStartupMs, 0, 60_000),
    uploadRequests: intEnv('BENCH_UPLOAD_REQUESTS', d.uploadRequests, 1, 1_000_000),
    uploadPeers: listEnv<PeerId>('BENCH_UPLOAD_PEERS', ['direct', 'sluice-info', 'sluice-other', 'nginx'], ALL_PEERS),
    heldCallers: intEnv('BENCH_HELD_CALLERS', d.heldCallers, 1, 10_000),
    heldBytes: intEnv('BENCH_HELD_KIB', d.heldBytes / 1024, 64, 1_048_576) * 1024,
    heldPeers: listEnv<PeerId>('BENCH_HELD_PEERS', ['sluice-info', 'sluice-other'], ALL_PEERS),
    installPeers: mode !== 'smoke' && process.env['BENCH_NO_INSTALL'] !== '1',
    freshRelays: mode !== 'smoke',
  };
}
