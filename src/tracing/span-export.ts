// A data plane thread's export of finished traces, off the request path: a bounded queue of
// finished requests' recorders, sent in batches by the OpenTelemetry SDK's OTLP/HTTP exporter
// machinery (`@opentelemetry/otlp-exporter-base`: its HTTP transport, retries, timeout and
// headers), one export in flight at a time, each bounded by its timeout. For `http/protobuf` the
// batch is encoded by otlp-protobuf.ts (why: there) and handed to the SDK's export delegate as its
// serializer; for `http/json` the SDK's own OTLP/JSON exporter takes the SDK's spans
// (span-records.ts `spansOf`). What the SDK's batch span processor does, with the losses counted
// where an operator sees them:
// - the queue holds at most `batch.maxQueueSpans` spans (config/tracing-config.ts): a finished request whose spans do not fit is
//   dropped (`queue_full`); a collector that is slow or hangs costs that memory, never more;
// - an export that fails (refused, 500, unreachable, past its timeout) loses its batch
//   (`export_failed`); the exporter retries what OTLP says is retryable within its timeout;
// - the first loss after a success is logged (`trace export failing`), and the first success
//   after losses (`trace export recovered`), so an outage is two lines, whatever its length.
// Spans are built only when their batch goes out. The exporter's modules are loaded when tracing
// is on, not before.
import type { ExportResult } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { Logger } from '../log/logger.js';
import { settlesWithin } from '../time/bounded-wait.js';
import { OtlpProtobuf } from './otlp-protobuf.js';
import type { RequestTrace } from './request-trace.js';
import { spanCount, spansOf } from './span-records.js';
import type { TracingSettings } from '../config/tracing-config.js';

/** At shutdown, how long the last spans may take to be sent before they are given up. */
const TRACE_FLUSH_MS = 2000;

/** Where the thread counts what became of its spans (metrics/request-counters.ts). */
export interface SpanCounts {
  spansExported(n: number): void;
  spansDropped(n: number, reason: 'queue_full' | 'export_failed'): void;
}

/** What sends a batch: the SDK's exporter with Sluice's encoding, or its JSON exporter. */
interface BatchExporter {
  export(traces: RequestTrace[], done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

/** The SDK's exporter of this thread, for the protocol of `settings`. */
async function exporterFor(settings: TracingSettings, basePath: string, version: string): Promise<BatchExporter> {
  const options = { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs, concurrencyLimit: 1 };
  const attributes = { ...settings.resource, 'service.name': settings.serviceName, 'service.version': version };
  const scope = { name: 'sluice', version };
  if (settings.protocol === 'http/json') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    const exporter = new OTLPTraceExporter(options);
    const origin = { resource: resourceFromAttributes(attributes), scope, basePath, provider: settings.genAiProvider };
    return { export: (traces, done) => exporter.export(spansOf(traces, origin), done), shutdown: () => exporter.shutdown() };
  }
  const [{ OTLPExporterBase }, http, { ProtobufTraceSerializer }] = await Promise.all([
    import('@opentelemetry/otlp-exporter-base'),
    import('@opentelemetry/otlp-exporter-base/node-http'),
    import('@opentelemetry/otlp-transformer'),
  ]);
  const encoder = new OtlpProtobuf({ basePath, provider: settings.genAiProvider }, attributes, scope);
  const serializer = { serializeRequest: (traces: RequestTrace[]) => encoder.encode(traces), deserializeResponse: (data: Uint8Array) => ProtobufTraceSerializer.deserializeResponse(data) };
  const count = { name: 'span' as const, countItems: (traces: RequestTrace[]) => traces.reduce((n, t) => n + t.spans, 0) };
  const delegate = http.createOtlpHttpExportDelegate(http.convertLegacyHttpOptions(options, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }), serializer, 'otlp_http_span_exporter', count, undefined);
  return new OTLPExporterBase(delegate);
}

export class SpanExport {
  private queue: RequestTrace[] = [];
  private queuedSpans = 0;
  private timer: NodeJS.Timeout | undefined = undefined;
  private exporting = false;
  private exporter: BatchExporter | undefined = undefined;
  /** Losses since the last success (logged once when they start, and with the recovery). */
  private lost = 0;
  private closed = false;
  /** Resolves when nothing is queued or in flight (close). */
  private idle: (() => void) | undefined = undefined;
  readonly ready: Promise<void>;

  constructor(
    private readonly settings: TracingSettings,
    basePath: string,
    version: string,
    private readonly counts: SpanCounts,
    private readonly logger: Logger,
  ) {
    this.ready = this.load(basePath, version);
  }

  private async load(basePath: string, version: string): Promise<void> {
    const exporter = await exporterFor(this.settings, basePath, version);
    if (this.closed) {
      void exporter.shutdown();
      return;
    }
    this.exporter = exporter;
    this.schedule();
  }

  /** A finished request's trace (data plane, at its end): queued, or dropped if the queue is full. */
  add(trace: RequestTrace): void {
    const spans = spanCount(trace);
    trace.spans = spans;
    if (this.closed || this.queuedSpans + spans > this.settings.batch.maxQueueSpans) {
      this.counts.spansDropped(spans, 'queue_full');
      this.lose(spans, 'the export queue is full');
      return;
    }
    this.queue.push(trace);
    this.queuedSpans += spans;
    this.schedule();
  }

  /** Sends a batch when one is full, else after the schedule's delay; nothing while one is in flight. */
  private schedule(): void {
    if (this.exporting || this.exporter === undefined || this.queue.length === 0) return;
    if (this.queuedSpans >= this.settings.batch.maxBatchSpans || this.closed) {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      // Not inside the request's end: the next turn.
      this.timer = setTimeout(() => this.send(), 0);
      return;
    }
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.send(), this.settings.batch.delayMs);
      this.timer.unref();
    }
  }

  private send(): void {
    this.timer = undefined;
    const exporter = this.exporter;
    if (this.exporting || exporter === undefined || this.queue.length === 0) return;
    let spans = 0;
    let taken = 0;
    while (taken < this.queue.length && (taken === 0 || spans + this.queue[taken]!.spans <= this.settings.batch.maxBatchSpans)) spans += this.queue[taken++]!.spans;
    const batch = this.queue.splice(0, taken);
    this.queuedSpans -= spans;
    this.exporting = true;
    exporter.export(batch, (result) => {
      this.exporting = false;
      if (result.code === 0) {
        this.counts.spansExported(spans);
        if (this.lost > 0) this.logger.info({ lost: this.lost }, 'trace export recovered');
        this.lost = 0;
      } else {
        this.counts.spansDropped(spans, 'export_failed');
        this.lose(spans, result.error?.message ?? 'failed');
      }
      if (this.queue.length === 0 && this.idle !== undefined) this.idle();
      this.schedule();
    });
  }

  private lose(spans: number, reason: string): void {
    if (this.lost === 0) this.logger.warn({ url: this.settings.url, spans, reason }, 'trace export failing');
    this.lost += spans;
  }

  /** Sends what is queued (within TRACE_FLUSH_MS) and stops; spans that finish later are dropped. */
  async close(): Promise<void> {
    this.closed = true;
    await this.ready;
    if (this.queue.length > 0 || this.exporting) {
      const flushed = new Promise<void>((resolve) => (this.idle = resolve));
      this.schedule();
      await settlesWithin(flushed, TRACE_FLUSH_MS);
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.exporter?.shutdown();
  }
}
