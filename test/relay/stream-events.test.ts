// Streamed answers as the gateway sees them: events found in the bytes relayed through real
// sockets, however the replica's writes split them over reads; their timing in /metrics, in the
// access line and in /status; interruptions after the status line; and answers that are not event
// streams left alone. With one data plane thread and with two (the counters of every thread add up).
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metricSamples, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { referenceEventCount } from '../helpers/sse-reference.js';
import { type SseReplica, startSseReplica, type StreamScript } from '../helpers/sse-replica.js';
import { eventually } from '../helpers/wait.js';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function setup(workers: number, service: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<{ tg: TestGateway; replica: SseReplica }> {
  const replica = await startSseReplica();
  const tg = await startTestGateway(rawService({ urls: [replica.url] }, service), { workers, ...extra });
  cleanups.push(async () => {
    await tg.close();
    await replica.close();
  });
  return { tg, replica };
}

/** Posts a script; resolves with the whole answer (or how it broke) and the request id. `seen(text)` is called with the text so far. */
async function stream(tg: TestGateway, script: StreamScript, seen?: (text: string) => void): Promise<{ status: number; text: string; id: string; broken: boolean }> {
  const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify(script) });
  let text = '';
  let broken = false;
  try {
    for await (const chunk of res.body) {
      text += (chunk as Buffer).toString();
      seen?.(text);
    }
  } catch {
    broken = true;
  }
  return { status: res.statusCode, text, id: String(res.headers['x-request-id']), broken };
}

async function accessLine(tg: TestGateway, id: string): Promise<Record<string, unknown>> {
  await eventually(() => tg.logs.some((l) => l.msg === 'request' && l.reqId === id), 10_000, `the access line of ${id}`);
  return tg.logs.find((l) => l.msg === 'request' && l.reqId === id)!;
}

async function metrics(origin: string): Promise<Map<string, number>> {
  return metricSamples(await (await fetch(`${origin}/metrics`)).text());
}

let seed = 4242;
function random(): number {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
}

/** A stream of OpenAI-style events, comments and multi-line data, with mixed line endings. */
function randomStream(): string {
  const eol = (): string => ['\n', '\r\n', '\r'][Math.floor(random() * 3)]!;
  let text = '';
  const blocks = 2 + Math.floor(random() * 5);
  for (let i = 0; i < blocks; i++) {
    const kind = random();
    if (kind < 0.5) text += `data: {"choices":[{"delta":{"content":"tok${i}"}}]}${eol()}${eol()}`;
    else if (kind < 0.65) text += `: keep-alive${eol()}${eol()}`;
    else if (kind < 0.8) text += `event: delta${eol()}data: first line${eol()}data: second line${eol()}${eol()}`;
    else if (kind < 0.9) text += `id: ${i}${eol()}retry: 1000${eol()}${eol()}`;
    else text += `data${eol()}${eol()}`;
  }
  return text;
}

/** `text` cut into pieces at 1 to 4 random places (including inside `\r\n` and `\n\n`). */
function randomPieces(text: string): [number, string][] {
  const cuts = new Set<number>();
  const n = 1 + Math.floor(random() * 4);
  for (let i = 0; i < n; i++) cuts.add(1 + Math.floor(random() * (text.length - 1)));
  const sorted = [...cuts].sort((a, b) => a - b);
  const pieces: [number, string][] = [];
  let from = 0;
  for (const to of [...sorted, text.length]) {
    pieces.push([pieces.length === 0 ? 0 : 3, text.slice(from, to)]);
    from = to;
  }
  return pieces;
}

for (const workers of [1, 2]) {
  describe(`workers: ${workers}`, { timeout: 60_000 }, () => {
    test('events split anywhere over reads are counted once: random cuts through real sockets match the reference count', async () => {
      const { tg } = await setup(workers);
      let expectedTotal = 0;
      const rounds = 40;
      for (let round = 0; round < rounds; round += 4) {
        // Four streams at once, so reads of different answers interleave too.
        const batch = await Promise.all(
          Array.from({ length: 4 }, async () => {
            const text = randomStream();
            const answer = await stream(tg, { pieces: randomPieces(text) });
            return { text, answer };
          }),
        );
        for (const { text, answer } of batch) {
          assert.equal(answer.status, 200);
          // Byte for byte, but for the comment line that carries the head when it came alone (docs/api.md#when-the-status-line-goes-out).
          assert.equal(answer.text.startsWith(':\n') ? answer.text.slice(2) : answer.text, text, 'relayed byte for byte');
          const line = await accessLine(tg, answer.id);
          assert.equal(line.events, referenceEventCount(text), `events of ${JSON.stringify(text)}`);
          expectedTotal += referenceEventCount(text);
        }
      }
      await eventually(async () => (await metrics(tg.origin)).get('sluice_stream_events_total{service="svc"}') === expectedTotal, 5_000, `events_total = ${expectedTotal}`);
      const m = await metrics(tg.origin);
      assert.equal(m.get('sluice_streams_active{service="svc"}'), 0);
      for (const reason of ['upstream_reset', 'upstream_idle', 'draining']) assert.equal(m.get(`sluice_stream_interruptions_total{service="svc",reason="${reason}"}`), 0, reason);
    });

    test('a stream with known gaps: time to first event, gaps between events and the longest gap, in the access line, /metrics and /status', async () => {
      const { tg, replica } = await setup(workers, {}, { admin: { host: '127.0.0.1', port: 0 } });
      const admin = `http://127.0.0.1:${tg.gateway.adminPort}`;
      // First event 150 ms after the head; then gaps of 100 and 250 ms; then three events in one write (gaps 60, 0 and 0).
      // Each piece is sent only once the caller has read the one before and its delay has passed:
      // the gateway wrote the earlier event before the later one was sent, so however late a busy
      // gateway reads, no gap it measures is shorter than its delay and no two pieces arrive together.
      const pieces: [number, string][] = [
        [0, ': warming up\n\n'],
        [150, 'data: {"t":1}\n\n'],
        [100, 'data: {"t":2}\n\n'],
        [250, 'data: {"t":3}\n\n'],
        [60, 'data: {"t":4}\n\ndata: {"t":5}\n\ndata: [DONE]\n\n'],
      ];
      let read = 0;
      const answer = await stream(tg, { pieces, gated: true }, (text) => {
        for (; read < pieces.length - 1 && text.includes(pieces[read]![1]); read++) replica.release();
      });
      assert.equal(answer.status, 200);
      const line = await accessLine(tg, answer.id);
      assert.equal(line.events, 6);
      assert.ok(Number(line.firstEventMs) >= 145, `firstEventMs ${String(line.firstEventMs)}`);
      assert.ok(Number(line.firstEventMs) >= Number(line.ttfbMs), 'the first event comes after the first byte (the comment)');
      assert.ok(Number(line.maxGapMs) >= 245, `maxGapMs ${String(line.maxGapMs)}`);
      // Order, not speed: the first event and the longest gap both fall within the request (each rounded to the µs).
      const firstToEnd = Number(line.ms) - Number(line.firstEventMs);
      assert.ok(Number(line.maxGapMs) <= firstToEnd + 0.002, `maxGapMs ${String(line.maxGapMs)} within first event → end (${firstToEnd} ms)`);

      const m = await metrics(admin);
      assert.equal(m.get('sluice_stream_events_total{service="svc"}'), 6);
      assert.equal(m.get('sluice_time_to_first_event_seconds_count{service="svc"}'), 1);
      assert.equal(m.get('sluice_time_to_first_event_seconds_bucket{le="0.1",service="svc"}'), 0, 'the first event took more than 100 ms');
      assert.equal(m.get('sluice_time_to_first_event_seconds_bucket{le="60",service="svc"}'), 1);
      // One gap per event after the first: 5, of which the two events written with the fourth count 0.
      assert.equal(m.get('sluice_time_between_events_seconds_count{service="svc"}'), 5);
      assert.equal(m.get('sluice_time_between_events_seconds_bucket{le="0.001",service="svc"}'), 2, 'events written together have gap 0');
      assert.equal(m.get('sluice_time_between_events_seconds_bucket{le="0.04",service="svc"}'), 2, 'the other gaps are 60 ms or more');
      const sum = m.get('sluice_time_between_events_seconds_sum{service="svc"}')!;
      assert.ok(sum >= 0.4, `the gaps add up to the first-to-last time (at least 0.41 s): ${sum}`);
      assert.ok(sum * 1000 <= firstToEnd + 0.002, `the gaps (${sum} s) add up to no more than first event → end (${firstToEnd} ms)`);
      assert.equal(m.get('sluice_streams_active{service="svc"}'), 0);

      // /status derives its figures from samples of these counters, once a second.
      let status: { stream: { active: number; eventsPerSecond: number; firstEventMs: { p50: number | null; p99: number | null }; betweenEventsMs: { p50: number | null; p99: number | null } } } | undefined;
      await eventually(
        async () => {
          const body = (await (await fetch(`${admin}/status`)).json()) as { services: (typeof status)[] };
          status = body.services[0];
          // A sample taken after the stream ended (one taken while it ran would show it active).
          return status!.stream.firstEventMs.p50 !== null && status!.stream.active === 0;
        },
        10_000,
        'the ended stream in /status',
      );
      const s = status!.stream;
      assert.equal(s.active, 0);
      assert.ok(s.eventsPerSecond > 0, `eventsPerSecond ${s.eventsPerSecond}`);
      assert.ok(s.firstEventMs.p50! >= 100, `firstEventMs.p50 ${s.firstEventMs.p50}`);
      assert.ok(s.firstEventMs.p99! >= s.firstEventMs.p50!);
      assert.ok(s.betweenEventsMs.p50! <= s.betweenEventsMs.p99! && s.betweenEventsMs.p99! >= 150, `betweenEventsMs ${JSON.stringify(s.betweenEventsMs)}`);
    });

    test('sluice_streams_active counts the streams being relayed, on every thread, and goes back to 0', async () => {
      const { tg, replica } = await setup(workers);
      // Each stream's second event waits for the test: all three are open until it has seen them.
      const running = [0, 1, 2].map(() => stream(tg, { pieces: [[0, 'data: a\n\n'], [0, 'data: b\n\n']], gated: true }));
      await eventually(async () => (await metrics(tg.origin)).get('sluice_streams_active{service="svc"}') === 3, 10_000, 'three active streams');
      replica.release();
      for (const answer of await Promise.all(running)) assert.equal(answer.status, 200);
      await eventually(async () => (await metrics(tg.origin)).get('sluice_streams_active{service="svc"}') === 0, 5_000, 'no active stream');
    });

    test('cut after the status line: a reset is upstream_reset, silence past bodyIdleMs is upstream_idle, a caller leaving is a 499 and no interruption', async () => {
      const { tg, replica } = await setup(workers, { timeouts: { bodyIdleMs: 300 } });
      // The replica resets once the caller has everything it wrote: the gateway read it all.
      const reset = await stream(tg, { pieces: [[0, 'data: a\n\n'], [20, 'data: b\n\ndata: c']], end: 'reset' }, (text) => {
        if (text.endsWith('data: c')) replica.allowResets();
      });
      assert.equal(reset.status, 200);
      assert.ok(reset.broken, 'the caller can tell the answer is incomplete');
      const resetLine = await accessLine(tg, reset.id);
      assert.equal(resetLine.outcome, 'upstream_error');
      assert.equal(resetLine.events, 2);

      const idle = await stream(tg, { pieces: [[0, 'data: a\n\n']], end: 'hang' });
      assert.ok(idle.broken);
      const idleLine = await accessLine(tg, idle.id);
      assert.equal(idleLine.outcome, 'upstream_error');
      assert.equal(idleLine.events, 1);

      const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: AUTH, body: JSON.stringify({ pieces: [[0, 'data: a\n\n'], [100, 'data: b\n\n']], end: 'hang' }) });
      const id = String(res.headers['x-request-id']);
      for await (const chunk of res.body) if ((chunk as Buffer).toString().includes('data: a')) break;
      res.body.destroy();
      const left = await accessLine(tg, id);
      assert.equal(left.status, 499);
      assert.equal(left.outcome, 'client_closed');

      await eventually(async () => (await metrics(tg.origin)).get('sluice_streams_active{service="svc"}') === 0, 5_000, 'no active stream');
      const m = await metrics(tg.origin);
      assert.equal(m.get('sluice_stream_interruptions_total{service="svc",reason="upstream_reset"}'), 1);
      assert.equal(m.get('sluice_stream_interruptions_total{service="svc",reason="upstream_idle"}'), 1);
      assert.equal(m.get('sluice_stream_interruptions_total{service="svc",reason="draining"}'), 0);
      assert.equal(m.get('sluice_stream_events_total{service="svc"}'), 4);
    });

    test('a stream still running when the drain runs out is cut as draining (the caller did not leave)', async () => {
      const { tg } = await setup(workers, {}, { drainTimeoutMs: 300 });
      const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: AUTH, body: JSON.stringify({ pieces: [[0, 'data: a\n\n']], end: 'hang' }) });
      const id = String(res.headers['x-request-id']);
      const reading = (async () => {
        for await (const chunk of res.body) void chunk;
      })().then(
        () => 'ended',
        () => 'cut',
      );
      await eventually(async () => (await metrics(tg.origin)).get('sluice_streams_active{service="svc"}') === 1, 5_000, 'the stream is active');
      await tg.gateway.drain();
      assert.equal(await reading, 'cut', 'cut, not ended cleanly');
      const line = await accessLine(tg, id);
      assert.equal(line.status, 200);
      assert.equal(line.outcome, 'draining');
      assert.equal(line.events, 1);
      // The listener is gone: the gateway's own rendering of its counters.
      const text = (await (tg.gateway as unknown as { metrics(): Promise<{ text: string }> }).metrics()).text;
      assert.match(text, /^sluice_stream_interruptions_total\{service="svc",reason="draining"\} 1$/m);
      assert.match(text, /^sluice_streams_active\{service="svc"\} 0$/m);
    });

    test('answers that are not event streams are relayed untouched and not counted', async () => {
      const { tg } = await setup(workers);
      const looksLikeEvents = 'data: {"a":1}\n\ndata: {"b":2}\n\n';
      for (const contentType of ['application/json', 'text/plain', 'text/event-streams']) {
        const answer = await stream(tg, { contentType, pieces: [[0, looksLikeEvents]] });
        assert.equal(answer.text, looksLikeEvents);
        const line = await accessLine(tg, answer.id);
        assert.equal(line.events, undefined, contentType);
        assert.equal(line.firstEventMs, undefined);
      }
      const sse = await stream(tg, { contentType: 'Text/Event-Stream; charset=utf-8', pieces: [[0, looksLikeEvents]] });
      assert.equal((await accessLine(tg, sse.id)).events, 2, 'the media type in any case, with parameters');
      const m = await metrics(tg.origin);
      assert.equal(m.get('sluice_stream_events_total{service="svc"}'), 2);
      assert.equal(m.get('sluice_time_to_first_event_seconds_count{service="svc"}'), 1);
    });
  });
}
