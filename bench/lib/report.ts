// BENCHMARKS.md from a run's record: the machine, the command, the targets met or missed, then one
// table per scenario. Deterministic in format (only the figures change between runs).
import { LABEL } from './peers.js';
import type { PeerId } from './modes.js';
import type { Figure, NewStreamsFigures, Record, TokensFigures } from './results.js';
import { median } from './stats.js';
import { FRAMINGS, type UploadRun } from './uploads.js';

const num = (v: number | null | undefined, digits = 0): string =>
  v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const signed = (v: number | null | undefined, digits = 0): string => (v === null || v === undefined || !Number.isFinite(v) ? '–' : `${v >= 0 ? '+' : ''}${num(v, digits)}`);
const med = (f: Figure | undefined, digits = 0): string => num(f?.median, digits);
const medSigned = (f: Figure | undefined, digits = 0): string => signed(f?.median, digits);
const rounds = (f: Figure | undefined, digits = 0): string => (f === undefined || f.rounds.length < 2 ? '' : ` [${f.rounds.map((v) => num(v, digits)).join(', ')}]`);
const ratio = (f: Figure | undefined): string => (f?.median === null || f?.median === undefined ? '–' : `${f.median.toFixed(2)}×`);

const NUMERIC = /^([-+]?[\d,.]+(×|%| µs| ms| MiB| KiB)?( \[.*\])?|–|0)$/;

/** A markdown table; a column is right-aligned when every cell in it is a number. */
function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  const right = header.map((_, i) => i > 0 && rows.length > 0 && rows.every((r) => NUMERIC.test(r[i] ?? '')));
  return [line(header), line(right.map((r) => (r ? '---:' : '---'))), ...rows.map(line)].join('\n');
}

/** One line per relay: the figures the README quotes (the same table heads BENCHMARKS.md). */
function headline(rec: Record): string {
  const d = rec.derived!;
  const s = rec.settings;
  const pair = (a: Figure | undefined, b: Figure | undefined): string => `${medSigned(a)} / ${medSigned(b)}`;
  const perToken = (f: TokensFigures | undefined): string => (f === undefined ? '–' : `${med(f.cpuUsPerToken, 1)} (${ratio(f.cpuVsNginx)})`);
  const rows = rec.peers
    .filter((p) => p.skipped === undefined && p.id !== 'direct')
    .map((p) => {
      const t = d.throughput[p.id];
      return [
        p.label,
        med(t?.reqPerS),
        ratio(t?.reqVsNginx),
        med(t?.cpuUsPerReq, 1),
        ratio(t?.cpuVsNginx),
        pair(d.ttfb[p.id]?.addedP50, d.ttfb[p.id]?.addedP99),
        perToken(d.tokens[p.id]),
        pair(d.tokens[p.id]?.addedP50, d.tokens[p.id]?.addedP99),
        perToken(d.tokensFew[p.id]),
      ];
    });
  return table(
    [
      'relay',
      'req/s',
      '÷ nginx',
      'relay CPU µs/req',
      '÷ nginx',
      'added TTFB p50 / p99 µs',
      `CPU µs/token, ${num(s.streams)} streams (÷ nginx)`,
      'added delivery p50 / p99 µs',
      `CPU µs/token, ${num(s.fewStreams)} streams (÷ nginx)`,
    ],
    rows,
  );
}

/** The table of one token scenario. */
function tokensTable(ran: PeerId[], figures: Partial<globalThis.Record<PeerId, TokensFigures>>): string {
  return table(
    ['peer', 'delivery p50', 'p90', 'p99', 'added p50', 'added p99', 'relay CPU µs/token', '÷ nginx', 'user / system µs/token', 'streams cut short'],
    ran.filter((id) => figures[id] !== undefined).map((id) => {
      const t = figures[id]!;
      const split = t.userUsPerToken.median === null || t.sysUsPerToken.median === null ? '–' : `${med(t.userUsPerToken, 1)} / ${med(t.sysUsPerToken, 1)}`;
      return [LABEL[id], med(t.p50), med(t.p90), med(t.p99), medSigned(t.addedP50) + rounds(t.addedP50), medSigned(t.addedP99) + rounds(t.addedP99), med(t.cpuUsPerToken, 1) + rounds(t.cpuUsPerToken, 1), ratio(t.cpuVsNginx), split, String(t.incompleteStreams)];
    }),
  );
}

/** The table of the new-streams scenario. */
function newStreamsTable(ran: PeerId[], figures: Partial<globalThis.Record<PeerId, NewStreamsFigures>>): string {
  return table(
    ['peer', 'relay CPU µs/stream', '÷ nginx', 'user / system µs/stream', 'relay CPU µs/token', 'streams cut short'],
    ran.filter((id) => figures[id] !== undefined && id !== 'direct').map((id) => {
      const t = figures[id]!;
      const split = t.userUsPerStream.median === null || t.sysUsPerStream.median === null ? '–' : `${med(t.userUsPerStream, 1)} / ${med(t.sysUsPerStream, 1)}`;
      return [LABEL[id], med(t.cpuUsPerStream, 1) + rounds(t.cpuUsPerStream, 1), ratio(t.cpuVsNginx), split, med(t.cpuUsPerToken, 1), String(t.incompleteStreams)];
    }),
  );
}

export function markdown(rec: Record, chartFile: string | undefined): string {
  const d = rec.derived!;
  const s = rec.settings;
  const ran = rec.peers.filter((p) => p.skipped === undefined).map((p) => p.id);
  const relays = ran.filter((id) => id !== 'direct');
  const out: string[] = [];
  const m = rec.machine;
  out.push(
    '# Sluice benchmarks',
    '',
    `Generated by \`${rec.command}\` (${rec.mode} mode) on ${rec.startedAt.slice(0, 10)}, ${rec.startedAt.slice(11, 16)} UTC, in ${num(rec.wallSeconds)} s.`,
    '',
    `- Machine: ${m.cpus} × ${m.cpuModel}, ${num(m.memTotalMiB)} MiB RAM, Linux ${m.kernel}; load average ${m.loadavgAtStart.map((l) => l.toFixed(2)).join(' ')} at start, ${m.loadavgAtEnd.map((l) => l.toFixed(2)).join(' ')} at the end (the machine is shared: compare peers within this run, not across runs)`,
    `- Node ${rec.node}, uWebSockets.js ${rec.versions['uWebSockets.js'] ?? 'uws-pack@20.0.8'}; ${(['nginx', 'haproxy', 'caddy'] as const).map((id) => rec.versions[id] ?? `${id} not available`).join('; ')}`,
    `- ${s.rounds} round(s), peers interleaved (the first peer rotates every round), each warmed up ${s.warmupS} s first; figures are medians across rounds, ratios and differences are taken within each round, then the median; per-round values in [brackets] and in \`results/latest.json\``,
  );
  for (const p of rec.peers) if (p.skipped !== undefined) out.push(`- **${p.label} skipped**: ${p.skipped}`);
  if (rec.mode !== 'full') out.push(`- **${rec.mode} mode: sizes are shrunk** (see settings in the JSON); these figures are not the benchmark's`);

  out.push('', '## Headline', '', headline(rec));
  out.push('', '## Targets', '', table(['target', 'goal', 'measured', ''], d.targets.map((t) => [t.name, t.goal, t.measured, t.met === null ? 'not measured' : t.met ? 'met' : '**missed**'])));
  out.push('', '## Ratios', '', table(['ratio', 'median', 'per round'], d.ratios.map((r) => [r.name, ratio(r.value), r.value.rounds.map((v) => v.toFixed(2)).join(', ')])));
  if (chartFile !== undefined) out.push('', `![Time to first byte per relay: p50, p90, p99, p99.9](${chartFile})`);

  if (Object.keys(d.throughput).length > 0) {
    out.push(
      '',
      '## 1. Throughput',
      '',
      `autocannon, ${s.connections} connections, ${s.durationS} s per round, POST 1 KiB JSON → 1 KiB JSON, pipelining 1. Relay CPU: user + system time of the relay's process (every thread; nginx runs as one process) from \`/proc/<pid>/stat\` over the run, divided by the requests completed — the steadiest figure on a shared machine; *user* and *system* are its two parts (system time is mostly the kernel's work for the socket calls, about the same for every relay; user time is the relay's own code and its runtime). Latency comes from autocannon's 1 ms histogram.`,
      '',
      table(
        ['peer', 'req/s', '÷ nginx', 'relay CPU µs/req', '÷ nginx', 'user / system µs/req', 'relay CPU', 'latency p50 ms', 'p99 ms', 'errors'],
        ran.filter((id) => d.throughput[id] !== undefined).map((id) => {
          const t = d.throughput[id]!;
          return [LABEL[id], med(t.reqPerS) + rounds(t.reqPerS), ratio(t.reqVsNginx), med(t.cpuUsPerReq, 1) + rounds(t.cpuUsPerReq, 1), ratio(t.cpuVsNginx), t.userUsPerReq.median === null || t.sysUsPerReq.median === null ? '–' : `${med(t.userUsPerReq, 1)} / ${med(t.sysUsPerReq, 1)}`, t.cpuPct.median === null ? '–' : `${num(t.cpuPct.median)}%`, med(t.latP50Ms), med(t.latP99Ms), String(t.errors)];
        }),
      ),
    );
  }
  if (Object.keys(d.ttfb).length > 0) {
    out.push(
      '',
      '## 2. Time to first byte',
      '',
      `${num(s.ttfbRequests)} sequential POSTs (1 KiB) on one keep-alive connection per round; request sent → first body byte in the client, µs. *Added* = the peer's percentile − direct's, in the same round.`,
      '',
      table(
        ['peer', 'p50', 'p90', 'p99', 'p99.9', 'added p50', 'added p99'],
        ran.filter((id) => d.ttfb[id] !== undefined).map((id) => {
          const t = d.ttfb[id]!;
          return [LABEL[id], med(t.p50), med(t.p90), med(t.p99), med(t.p999), medSigned(t.addedP50) + rounds(t.addedP50), medSigned(t.addedP99) + rounds(t.addedP99)];
        }),
      ),
    );
  }
  const tokensMethod =
    'Delivery = the replica wrote the token → the client read it, per token, µs; both stamp CLOCK_MONOTONIC (`process.hrtime`), one clock for every process on Linux. Only tokens written once every stream had started are counted (the connection burst is not token delivery). *Added* = the peer\'s − direct\'s, same round. Relay CPU per token: the relay\'s CPU over the whole run (opening the streams included) ÷ tokens delivered; ÷ nginx within each round.';
  if (Object.keys(d.tokens).length > 0) {
    out.push(
      '',
      '## 3. Token streams: 1,000 at once',
      '',
      `${num(s.streams)} concurrent SSE streams (one connection each) of ${s.streamTokens} tokens from a batching replica: every ${s.streamGapMs} ms one clock writes the next token to every open stream at once, as a model server batching its requests does, so a relay must move a burst of ${num(s.streams)} small writes each tick. ${tokensMethod}`,
      '',
      tokensTable(ran, d.tokens),
    );
  }
  if (Object.keys(d.tokensFew).length > 0) {
    out.push(
      '',
      '## 3b. Token streams: a few, fast',
      '',
      `${num(s.fewStreams)} concurrent SSE streams of ${s.fewStreamTokens} tokens, a token to each every ${s.fewStreamGapMs} ms from the same batching replica: the per-token cost when each burst is small. ${tokensMethod}`,
      '',
      tokensTable(ran, d.tokensFew),
    );
  }
  if (Object.keys(d.newStreams).length > 0) {
    out.push(
      '',
      '## 3c. New streams: a connection each',
      '',
      `${num(s.newStreams)} SSE streams of ${s.newStreamTokens} tokens, one every ${num(s.newStreamGapMs)} ms, each on a new connection (raw sockets; the caller closes it after the last chunk), started evenly over ${num((2 * s.newStreamTokens * s.newStreamGapMs) / 1000, 1)} s (two streams' lives: about half are open at once, and the second half starts as the first ends, as in a steady state): what setting a stream up costs (the caller's connection and request, the upstream exchange, the access line), which the token scenarios, with their connections opened once, do not show. ${s.newStreamsWarmup > 0 ? `Each relay got ${num(s.newStreamsWarmup)} short streams on new connections before the rounds, so the rounds measure a relay in service (V8 optimises code run once per stream only after a few thousand streams). ` : ''}Relay CPU (\`utime + stime\` of its process over the run) ÷ streams, and ÷ nginx's within each round.`,
      '',
      newStreamsTable(ran, d.newStreams),
    );
  }
  const slow = rec.scenarios.slowReader.peers;
  if (Object.keys(slow).length > 0) {
    out.push(
      '',
      '## 4. Slow reader',
      '',
      `A raw-socket client reads a ${num(s.slowBytes / 1048576)} MiB answer at ${num(s.slowRateBytesPerS / 1048576)} MiB/s (the replica writes as fast as it is let); the relay's RSS, sampled every 100 ms: growth = peak − before. Once per relay, on a fresh process of it (started, given 500 requests and 100 idle streams, then measured).`,
      '',
      table(
        ['relay', 'read MiB', 'seconds', 'RSS before MiB', 'peak MiB', 'growth MiB'],
        relays.filter((id) => slow[id] !== undefined).map((id) => {
          const r = slow[id]!;
          return [LABEL[id], num(r.bytes / 1048576, 1), num(r.seconds, 1), num(r.rssBeforeMiB, 1), num(r.rssPeakMiB, 1), num(r.growthMiB, 1)];
        }),
      ),
    );
  }
  const idle = rec.scenarios.idleStreams.peers;
  if (Object.keys(idle).length > 0) {
    out.push(
      '',
      '## 5. Idle streams',
      '',
      `${num(s.idleStreams)} streams opened (raw sockets, one connection each), each answered with SSE headers and one comment, then idle; the relay's RSS before and 0.5 s after the last one opened; (after − before) ÷ streams. Once per relay, on a fresh process of it (started, given 500 requests and 100 idle streams, then measured).`,
      '',
      table(
        ['relay', 'RSS before MiB', 'RSS with streams MiB', 'KiB per stream'],
        relays.filter((id) => idle[id] !== undefined).map((id) => {
          const r = idle[id]!;
          return [LABEL[id], num(r.rssBeforeMiB, 1), num(r.rssAfterMiB, 1), num(r.perStreamKiB, 1)];
        }),
      ),
    );
  }
  const cold = rec.scenarios.coldStart.run;
  if (cold !== null) {
    out.push(
      '',
      '## 6. Cold start',
      '',
      `A fresh Sluice (info) with a launched service (\`bench/replica.ts\`, ${s.coldStartupMs} ms before it listens, readiness probe \`GET /ready\`, min 0, max 1); ${num(cold.requests)} POSTs at once, each on its own connection. Lost = not 200 with the replica's answer. The replica stamps when it answered its first readiness probe, when it accepted the first connection after that (the first queued request reaching it: Node accepts a burst's connections before it reads any) and when it read the first request.`,
      '',
      table(
        ['requests', 'answered 200', 'lost', 'statuses', 'ready → first request arrives, ms', 'ready → first request read, ms', 'burst done after ms'],
        [[num(cold.requests), num(cold.ok), num(cold.lost), Object.entries(cold.statuses).map(([k, v]) => `${k}: ${v}`).join(', '), num(cold.readyToFirstRequestMs, 2), num(cold.readyToFirstRequestReadMs, 2), num(cold.burstMs)]],
      ),
    );
  }
  out.push(...uploadSections(rec));
  out.push(
    '',
    '## The peers',
    '',
    table(
      ['peer', 'what'],
      rec.peers.map((p) => [p.label, describe(p.id) + (p.skipped === undefined ? '' : ` — skipped: ${p.skipped}`)]),
    ),
    '',
  );
  return out.join('\n');
}

function describe(id: PeerId): string {
  switch (id) {
    case 'direct':
      return 'the replica itself (`bench/replica.ts`, node:http)';
    case 'sluice-info':
      return 'the real gateway (`bench/gateway.ts`), `workers: 1`, log level info: an access-log line per request to a file; with the inference options on: `queue.keepAliveMs` 15 s, `replicas.load` read from the replica every 250 ms, session affinity on `X-Session-Id` (sent by the clients), a token priority (event timing of streams is always on)';
    case 'sluice-info-plain':
      return 'Sluice info with none of those options (the clients send no session header): their cost is the difference';
    case 'sluice-warn':
      return 'Sluice info at log level warn (no access log)';
    case 'sluice-info-w2':
      return 'the same as Sluice info with `workers: 2`';
    case 'nginx':
      return 'one process (`master_process off`), keep-alive upstream, `proxy_buffering off`, access log to a file (its default); config: `bench/lib/nginx.ts`';
    case 'haproxy':
      return '`nbthread 1`, `http-reuse always`, `option http-no-delay` (without it HAProxy coalesces small writes and adds tens of ms per token), no log; config: `bench/lib/haproxy.ts`';
    case 'caddy':
      return '`GOMAXPROCS=1`, `reverse_proxy` with `flush_interval -1`, no access log, admin off; config: `bench/lib/caddy.ts`';
    case 'http-proxy':
      return '`http-proxy` on node:http, keep-alive agent to the replica';
    case 'fastify-proxy':
      return '`@fastify/http-proxy` (undici underneath), no request logging';
    case 'bare':
      return 'the floor of this stack: uWS in, a keep-alive pool of `net.Socket`s out, nothing else: no auth, checks, logs or metrics (`bench/bare-relay.ts`)';
    case 'sluice-other':
      return 'Sluice info as another build runs it (`BENCH_OTHER_GATEWAY`: its `dist/bench/gateway.js`), e.g. before a change';
    case 'sluice-limits':
      return 'Sluice info whose token has limits a run never reaches (`requestsPerMinute`, `concurrent`, `tokensPerMinute`), counted in-process: every request admitted, reserved and settled';
    case 'sluice-limits-redis':
      return 'the same limits in a redis-server this run starts (`limits.store`), leased in shares as several gateways would';
    case 'sluice-router':
      return 'Sluice info reached through a router (`BENCH_ROUTER`): each body is read for its `"model"` before the request goes on';
    case 'sluice-trace-1pct':
    case 'sluice-trace-all':
      return 'Sluice info with tracing on (`BENCH_TRACING`), `sampleRatio` 0.01 or 1, exporting OTLP/protobuf to a sink process of the run that drops every export (`bench/otlp-sink.ts`)';
    case 'sluice-other-limits':
    case 'sluice-other-limits-redis':
    case 'sluice-other-router':
    case 'sluice-other-trace-all':
      return 'the same config as the peer without `other`, run by the build of `BENCH_OTHER_GATEWAY` (`BENCH_SLUICE_SRC`): before and after a change';
  }
}

/** A median over rounds of one figure of an upload run. */
function uploadMedian(runs: UploadRun[] | undefined, pick: (r: UploadRun) => number | null): number | null {
  const values = (runs ?? []).map(pick).filter((v): v is number => v !== null && Number.isFinite(v));
  return values.length === 0 ? null : median(values);
}

/** 7. Chunked uploads; 8. Held uploads (bench/lib/uploads.ts). */
function uploadSections(rec: Record): string[] {
  const s = rec.settings;
  const out: string[] = [];
  const runs = rec.scenarios.uploads.rounds;
  const ids = (Object.keys(runs) as PeerId[]).sort((a, b) => s.peers.indexOf(a) - s.peers.indexOf(b));
  if (ids.length > 0) {
    const rows: string[][] = [];
    for (const id of ids) {
      const base = runs[id]?.['length'];
      for (const framing of FRAMINGS) {
        const r = runs[id]?.[framing];
        const p50 = uploadMedian(r, (x) => x.ttfbP50Us);
        const cpu = uploadMedian(r, (x) => x.relayCpuUsPerReq);
        const baseP50 = uploadMedian(base, (x) => x.ttfbP50Us);
        const baseCpu = uploadMedian(base, (x) => x.relayCpuUsPerReq);
        rows.push([
          LABEL[id],
          framing,
          num(p50),
          num(uploadMedian(r, (x) => x.ttfbP99Us)),
          framing === 'length' || p50 === null || baseP50 === null ? '–' : signed(p50 - baseP50),
          num(cpu, 1),
          framing === 'length' || cpu === null || baseCpu === null ? '–' : signed(cpu - baseCpu, 1),
          num(uploadMedian(r, (x) => x.reqPerS)),
        ]);
      }
    }
    out.push(
      '',
      '## 7. Chunked uploads',
      '',
      `The same 1 KiB JSON request, ${num(s.uploadRequests)} times in a row on one keep-alive connection (raw socket, no Nagle), framed three ways: \`length\` (Content-Length, head and body in one write), \`chunked\` (one chunk and the last-chunk, in the head's write: the body arrives whole) and \`chunked-pieces\` (the head, then four 256-byte chunks and the last-chunk, each its own write). TTFB: first byte written → first byte of the answer, requests one at a time; relay CPU and req/s: the same number of requests again on ${num(s.connections)} connections at once (\`BENCH_CONNECTIONS\`), user + system ÷ requests. Sluice holds both chunked framings (docs/configuration.md#chunked-uploads); *vs length* is the difference to \`length\` on the same peer. Medians of ${s.rounds} round${s.rounds === 1 ? '' : 's'}, the peers interleaved.`,
      '',
      table(['peer', 'framing', 'TTFB p50 µs', 'TTFB p99 µs', 'p50 vs length', 'relay CPU µs/req', 'CPU vs length', 'req/s'], rows),
    );
  }
  const held = rec.scenarios.heldUploads.peers;
  const heldIds = (Object.keys(held) as PeerId[]).sort((a, b) => s.peers.indexOf(a) - s.peers.indexOf(b));
  if (heldIds.length > 0) {
    out.push(
      '',
      '## 8. Held uploads',
      '',
      `${num(s.heldCallers)} connections at once, each sending the head and ${num(s.heldBytes / 1024)} KiB of a chunked body (64 KiB chunks) and never its end; the relay's RSS sampled every 100 ms until every byte was handed to the kernel and RSS stopped growing for a second; growth = peak − before. Sluice holds each body up to \`uploads.bufferBytes\` (1 MiB) within the service's account (\`queue.maxRequests\` × 64 KiB: 62.5 MiB by default); past it, bodies stream on to the replica, which reads them. Once per relay, on a fresh process of it.`,
      '',
      table(
        ['relay', 'callers', 'MiB written at the peak', 'RSS before MiB', 'peak MiB', 'growth MiB'],
        heldIds.map((id) => {
          const r = held[id]!;
          return [LABEL[id], num(r.callers), num(r.bytesWritten / 1048576), num(r.rssBeforeMiB, 1), num(r.rssPeakMiB, 1), num(r.growthMiB, 1)];
        }),
      ),
    );
  }
  return out;
}
