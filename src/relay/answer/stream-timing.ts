// The timing of one streamed answer (Content-Type text/event-stream) as it is relayed: its events
// are found in each chunk written to the caller (sse-events.ts) and counted into the service's
// stream counters (the histograms of time to first event and of gaps between events), and what
// the access line says of it is kept here.
//
// One clock reading per chunk that completes an event, none for the others. Events completed by
// the same chunk reached the caller together: the first of them has the gap since the previous
// chunk's events, the others a gap of 0. That is inter-token latency as the caller sees it (a
// replica that flushes tokens in batches, or a reader that fell behind, gets bursts), and it keeps
// the mean gap exact: the gaps of an answer add up to the time from its first event to its last.
import type { RelayError } from '../../http/errors.js';
import type { Interruption, StreamCounters } from '../../metrics/request-counters.js';
import { UpstreamError } from '../../upstream/errors.js';
import { EventScanner } from './sse-events.js';

export class StreamTiming {
  /** Events written to the caller. */
  events = 0;
  /** `performance.now()` when the first event was written; 0 before. */
  firstEventAt = 0;
  /** The longest gap between events written in different chunks, in ms. */
  maxGapMs = 0;
  /** `performance.now()` when the last event was written; 0 before. */
  lastEventAt = 0;
  private readonly scanner = new EventScanner();

  constructor(
    private readonly counters: StreamCounters,
    /** `performance.now()` when the request arrived. */
    private readonly startedAt: number,
  ) {
    counters.opened();
  }

  /** A chunk of the answer was written to the caller (call during the write: it may be a view of a shared buffer). */
  written(chunk: Buffer): void {
    const count = this.scanner.scan(chunk);
    if (count === 0) return;
    const now = performance.now();
    if (this.events === 0) {
      this.firstEventAt = now;
      this.counters.firstEvents(count, (now - this.startedAt) / 1000);
    } else {
      const gap = now - this.lastEventAt;
      if (gap > this.maxGapMs) this.maxGapMs = gap;
      this.counters.laterEvents(count, gap / 1000);
    }
    this.events += count;
    this.lastEventAt = now;
  }

  /** The answer is over (once): `interruption` says why it was cut, if it was. */
  closed(interruption: Interruption | undefined): void {
    this.counters.closed(interruption);
  }

  /** Events that count as a completion token each when the answer reports no usage: every one but `[DONE]`. */
  get completionEvents(): number {
    return this.events - this.scanner.done;
  }

  /** From the request's arrival to the first event, in ms; -1 without an event. */
  get firstEventMs(): number {
    return this.events === 0 ? -1 : this.firstEventAt - this.startedAt;
  }
}

/** Why a relayed stream failed, from the upstream error that cut it (undefined: not the replica's doing). */
export function interruptionOf(error: RelayError): Interruption | undefined {
  if (error.code === 'payload_too_large') return undefined;
  const cause = error.cause;
  return cause instanceof UpstreamError && cause.code === 'UPSTREAM_BODY_TIMEOUT' ? 'upstream_idle' : 'upstream_reset';
}
