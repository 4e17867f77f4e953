// An OTLP/HTTP trace receiver inside the test: what a collector would see of Sluice's spans.
// Protobuf bodies are decoded with the OpenTelemetry project's own generated OTLP messages (the
// `otlp-protos` dev dependency: @opentelemetry/otlp-transformer 0.212.0, the last release that
// ships them), JSON bodies as OTLP/JSON. It can answer 200, answer 500, or hang (never answer),
// and tells each arrival as an event, so a test waits for spans instead of sleeping.
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

const require = createRequire(import.meta.url);
interface Decoder {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
}
const root = require('otlp-protos/build/src/generated/root.js') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: Decoder } } } } };
};
const REQUEST = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's numbering: 1 internal, 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  events: { name: string; timeNs: bigint; attributes: Record<string, AttributeValue> }[];
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, AttributeValue>;
  scope: string;
}

export const KIND = { internal: 1, server: 2, client: 3 } as const;

type Mode = 'ok' | 'fail' | 'hang';

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Export requests received (answered or not), and the content types they came with. */
  requests: number;
  contentTypes: string[];
  mode: Mode;
  /** Resolves once `predicate` holds over the spans received (checked at each arrival). */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean): Promise<void>;
  /** Resolves once `n` export requests have arrived in total. */
  waitForRequests(n: number): Promise<void>;
  close(): Promise<void>;
}

type Decoded = {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: RawSpan[] }[];
  }[];
};
interface KeyValue {
  key: string;
  value?: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}
interface RawSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: KeyValue[];
  events?: { name: string; timeUnixNano: string; attributes?: KeyValue[] }[];
  status?: { code?: number };
}

function attributesOf(list: KeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of list ?? []) {
    const v = kv.value ?? {};
    if (v.stringValue !== undefined) out[kv.key] = v.stringValue;
    else if (v.intValue !== undefined) out[kv.key] = Number(v.intValue);
    else if (v.boolValue !== undefined) out[kv.key] = v.boolValue;
    else if (v.doubleValue !== undefined) out[kv.key] = v.doubleValue;
  }
  return out;
}

/** OTLP/JSON gives ids as hex; the protobuf message, decoded to an object, as base64. */
function hex(id: string | undefined, json: boolean): string {
  if (id === undefined || id === '') return '';
  return json ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');
}

function spansOf(decoded: Decoded, json: boolean): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of decoded.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hex(s.traceId, json),
          spanId: hex(s.spanId, json),
          parentSpanId: hex(s.parentSpanId, json),
          name: s.name,
          kind: s.kind ?? 0,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: attributesOf(s.attributes),
          events: (s.events ?? []).map((e) => ({ name: e.name, timeNs: BigInt(e.timeUnixNano), attributes: attributesOf(e.attributes) })),
          status: s.status?.code ?? 0,
          resource,
          scope: ss.scope?.name ?? '',
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(mode: Mode = 'ok'): Promise<OtlpReceiver> {
  const events = new EventEmitter();
  const hanging: ServerResponse[] = [];
  const receiver: OtlpReceiver = {
    url: '',
    spans: [],
    requests: 0,
    contentTypes: [],
    mode,
    async waitFor(predicate) {
      while (!predicate(receiver.spans)) await once(events, 'spans');
    },
    async waitForRequests(n) {
      while (receiver.requests < n) await once(events, 'request');
    },
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      receiver.requests += 1;
      receiver.contentTypes.push(String(req.headers['content-type']));
      events.emit('request');
      if (receiver.mode === 'hang') {
        hanging.push(res);
        return;
      }
      if (receiver.mode === 'fail') {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('collector failure');
        return;
      }
      const body = Buffer.concat(chunks);
      const json = String(req.headers['content-type']).startsWith('application/json');
      const decoded = json ? (JSON.parse(body.toString('utf8')) as Decoded) : (REQUEST.toObject(REQUEST.decode(body), { longs: String, bytes: String, enums: Number, defaults: false }) as Decoded);
      receiver.spans.push(...spansOf(decoded, json));
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : '');
      events.emit('spans');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  return receiver;
}

/** The spans of one trace, by trace id. */
export function traceOf(spans: readonly ReceivedSpan[], traceId: string): ReceivedSpan[] {
  return spans.filter((s) => s.traceId === traceId);
}

/** The children of `parent` in `spans`. */
export function childrenOf(spans: readonly ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] {
  return spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);
}
