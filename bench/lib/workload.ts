// What every peer is asked and answers: shared by the parent and the children.
import { createHash } from 'node:crypto';

/** The replica's answer to POST /v1/infer (small JSON, with Content-Length). */
export const INFER_ANSWER =
  '{"id":"bench","model":"bench","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[0.1,0.2,0.3]}]}';

/** The request body every throughput and TTFB request sends. */
export const INFER_REQUEST = '{"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2,3]}]}';

export const INFER_PATH = '/v1/infer';
export const STREAM_PATH = '/v1/stream';

/** The bearer token the benchmark's gateway accepts (a fixed, public, bench-only value). */
export const BENCH_TOKEN = 'slc_bench_token_not_a_secret_0123456789abcdefghijklmnop';
export const BENCH_TOKEN_SHA256 = createHash('sha256').update(BENCH_TOKEN).digest('hex');

/** The gateway's service slug: requests go to /api/v1/services/bench/request/<path>. */
export const BENCH_SLUG = 'bench';
