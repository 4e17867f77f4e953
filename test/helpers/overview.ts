// Helpers for the service overview tests: a gateway with an admin listener, a static service
// whose replica answers when the test says so, and a launched service whose cold start ends when
// the test opens its gate (test/fixtures/gated-model-server.ts).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBody, startReplica, type TestReplica } from './replica.js';
import { rawService, startTestGateway, type TestGateway } from './gateway.js';

/** The compiled gated model server (dist/test/fixtures/gated-model-server.js). */
export const GATED_MODEL_SERVER = fileURLToPath(new URL('../fixtures/gated-model-server.js', import.meta.url));

export interface ServiceStatusJson {
  slug: string;
  baseUrl: string;
  kind: string;
  state: string;
  replicas: Record<string, number>;
  queued: number;
  inflight: number;
  requestsPerSecond: number;
  ttfbMs: { p50: number | null; p99: number | null };
  lastMinute: { requests: number; errors: number };
  stream: {
    active: number;
    eventsPerSecond: number;
    firstEventMs: { p50: number | null; p99: number | null };
    betweenEventsMs: { p50: number | null; p99: number | null };
  };
  routing: { policy: string; affinityHeader: string | null };
  loads: { replica: string; waiting: number | null; running?: number | null; cacheUsage: number | null; ageMs: number | null; used: boolean; problem: string | null }[];
}

export interface StatusJson {
  generatedAt: string;
  services: ServiceStatusJson[];
}

export interface OverviewFixture {
  tg: TestGateway;
  /** `http://127.0.0.1:ADMIN_PORT` */
  admin: string;
  /** The static service's replica: `/hold` waits for `release()`, `/fail` answers 500, anything else 200. */
  replica: TestReplica;
  /** Answers every `/hold` request waiting so far. */
  release(): void;
  /** `/hold` requests the replica holds now (a request can be in flight in the gateway before it
   *  reaches the replica: wait for this before `release()`). */
  holding(): number;
  /** Lets the launched service's replica start. */
  openGate(): void;
  status(): Promise<StatusJson>;
  service(slug: string): Promise<ServiceStatusJson>;
  close(): Promise<void>;
}

/** Services `api` (static) and `llm` (launched, gated, the demo model server), admin on port 0, two workers. */
export async function startOverviewFixture(extra: Record<string, unknown> = {}): Promise<OverviewFixture> {
  const held: Array<() => void> = [];
  const replica = await startReplica(async (req, res) => {
    await readBody(req);
    if (req.url === '/hold') await new Promise<void>((resolve) => held.push(resolve));
    const status = req.url === '/fail' ? 500 : 200;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: req.url, status }));
  });
  const gate = join(mkdtempSync(join(tmpdir(), 'sluice-gate-')), 'open');
  let tg: TestGateway;
  try {
    tg = await startTestGateway(
      [
        rawService({ urls: [replica.url] }, { slug: 'api' }),
        rawService(
          { command: [process.execPath, GATED_MODEL_SERVER], env: { GATE_FILE: gate, TOKEN_DELAY_MS: '20' }, readyPath: '/health', max: 1 },
          { slug: 'llm' },
        ),
      ],
      // Two data plane threads: what /status shows must cover requests whichever thread served them.
      { admin: { host: '127.0.0.1', port: 0 }, workers: 2, ...extra },
    );
  } catch (err) {
    await replica.close();
    throw err;
  }
  const admin = `http://127.0.0.1:${tg.gateway.adminPort}`;
  const status = async (): Promise<StatusJson> => {
    const res = await fetch(`${admin}/status`);
    if (res.status !== 200) throw new Error(`/status answered ${res.status}`);
    return (await res.json()) as StatusJson;
  };
  return {
    tg,
    admin,
    replica,
    release: () => held.splice(0).forEach((resolve) => resolve()),
    holding: () => held.length,
    openGate: () => writeFileSync(gate, 'open'),
    status,
    service: async (slug) => {
      const found = (await status()).services.find((s) => s.slug === slug);
      if (found === undefined) throw new Error(`no service ${slug} in /status`);
      return found;
    },
    close: async () => {
      held.splice(0).forEach((resolve) => resolve());
      await tg.close();
      await replica.close();
    },
  };
}
