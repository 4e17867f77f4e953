// What every peer is asked and answers: shared by the parent and the children.
import { createHash } from 'node:crypto';

/** A JSON object of exactly `bytes` bytes: `fields`, then a padding string. */
function jsonOfSize(bytes: number, fields: string): string {
  const open = `{${fields},"pad":"`;
  const close = '"}';
  const pad = bytes - open.length - close.length;
  if (pad < 0) throw new Error(`jsonOfSize: ${bytes} bytes is too small`);
  return open + 'x'.repeat(pad) + close;
}

/** The replica's answer to POST /v1/infer: 1 KiB of JSON, with Content-Length. */
export const INFER_ANSWER = jsonOfSize(
  1024,
  '"id":"bench","model":"bench","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[0.1,0.2,0.3]}]',
);

/** The model every request names (a router routes by it: the `sluice-router` peers). */
export const BENCH_MODEL = 'bench';

/** The request body every throughput and TTFB request sends: 1 KiB of JSON, naming the model and its max_tokens as an LLM client does. */
export const INFER_REQUEST = jsonOfSize(1024, `"model":"${BENCH_MODEL}","max_tokens":16,"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,3]}]`);

/** The body of every streamed request. */
export const STREAM_REQUEST = `{"model":"${BENCH_MODEL}","max_tokens":64,"stream":true}`;

export const INFER_PATH = '/v1/infer';
/** POST /v1/stream?tokens=N&gap_ms=G: SSE, one stamped token every G ms. */
export const STREAM_PATH = '/v1/stream';
/** GET /v1/blob?bytes=N: N bytes of application/octet-stream, written as fast as the reader takes them. */
export const BLOB_PATH = '/v1/blob';
/** POST /v1/idle: SSE headers and one comment, then nothing until the caller leaves. */
export const IDLE_PATH = '/v1/idle';
/** GET /ready: the replica's readiness probe (answered once it listens). */
export const READY_PATH = '/ready';
/** GET /metrics: the replica's queue in Prometheus text, as a model server exposes it (read by Sluice's `replicas.load`). */
export const METRICS_PATH = '/metrics';
/** What the bench replica's /metrics shows: nothing waiting, a tenth of its cache in use. */
export const METRICS_TEXT = '# TYPE bench_waiting gauge\nbench_waiting 0\n# TYPE bench_cache_usage gauge\nbench_cache_usage 0.1\n';
/** The header Sluice's session affinity reads in the benchmark (`routing.affinityHeader`). */
export const SESSION_HEADER = 'x-session-id';

/** The bearer token the benchmark's gateway accepts (a fixed, public, bench-only value). */
export const BENCH_TOKEN = 'slc_bench_token_not_a_secret_0123456789abcdefghijklmnop';
export const BENCH_TOKEN_SHA256 = createHash('sha256').update(BENCH_TOKEN).digest('hex');

/** The gateway's service slug: requests go to /api/v1/services/bench/request/<path>. */
export const BENCH_SLUG = 'bench';
/** The router in front of it (the `…-router` peers): /api/v1/services/bench-router/request/<path>. */
export const BENCH_ROUTER_SLUG = 'bench-router';
