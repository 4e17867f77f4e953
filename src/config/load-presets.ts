// The metric names of `replicas.load.preset`, per model server. Each list is tried in order and the
// first name the server exports counts, so a preset also reads a server version that still
// exports the older name.
//
// - vLLM: `vllm:num_requests_waiting` (requests waiting to be scheduled) and
//   `vllm:kv_cache_usage_perc` (KV-cache blocks in use, 0 to 1), which replaced
//   `vllm:gpu_cache_usage_perc` in 2025 (vLLM pull request 18354); newer versions no longer export
//   the old name by default. Both carry one series per engine (`engine`, `model_name` labels).
// - SGLang: `sglang:num_queue_reqs` (requests in the waiting queue) and `sglang:token_usage` (the
//   share of the KV-cache token pool in use, 0 to 1).
// - Text Generation Inference: `tgi_queue_size` (requests waiting to be batched); it exports no
//   cache usage.
// - llama.cpp's server (`--metrics`): `llamacpp:requests_deferred` (requests waiting for a free
//   slot); current builds export no cache usage.
import type { LoadPreset } from './types.js';

export interface LoadMetricNames {
  waiting: readonly string[];
  cacheUsage: readonly string[];
}

export const LOAD_PRESETS: Readonly<Record<LoadPreset, LoadMetricNames>> = {
  vllm: { waiting: ['vllm:num_requests_waiting'], cacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'] },
  sglang: { waiting: ['sglang:num_queue_reqs'], cacheUsage: ['sglang:token_usage'] },
  tgi: { waiting: ['tgi_queue_size'], cacheUsage: [] },
  llamacpp: { waiting: ['llamacpp:requests_deferred'], cacheUsage: [] },
};

export const LOAD_PRESET_NAMES = Object.keys(LOAD_PRESETS) as LoadPreset[];
