// The metric names of `replicas.load.preset`, per model server. Each list is tried in order and the
// first name the server exports counts, so a preset also reads a server version that still
// exports the older name.
//
// - vLLM: `vllm:num_requests_waiting` (requests waiting to be scheduled) and
//   `vllm:kv_cache_usage_perc` (KV-cache blocks in use, 0 to 1), which replaced
//   `vllm:gpu_cache_usage_perc` in 2025 (vLLM pull request 18354); newer versions no longer export
//   the old name by default. Both carry one series per engine (`engine`, `model_name` labels).
//   Running: `vllm:num_requests_running` (requests in model execution batches).
// - SGLang: `sglang:num_queue_reqs` (requests in the waiting queue) and `sglang:token_usage` (the
//   share of the KV-cache token pool in use, 0 to 1). Running: `sglang:num_running_reqs`.
// - Text Generation Inference: `tgi_queue_size` (requests waiting to be batched); it exports no
//   cache usage. Running: `tgi_batch_current_size` (requests in the current batch).
// - llama.cpp's server (`--metrics`): `llamacpp:requests_deferred` (requests waiting for a free
//   slot); current builds export no cache usage. Running: `llamacpp:requests_processing`.
//
// The running gauge is read with the others in the same pass and shown on /status; it does not
// weigh in the choice.
import type { LoadPreset } from './types.js';

export interface LoadMetricNames {
  waiting: readonly string[];
  cacheUsage: readonly string[];
  /** The requests the server is running now (summed over series). */
  running: readonly string[];
}

export const LOAD_PRESETS: Readonly<Record<LoadPreset, LoadMetricNames>> = {
  vllm: { waiting: ['vllm:num_requests_waiting'], cacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'], running: ['vllm:num_requests_running'] },
  sglang: { waiting: ['sglang:num_queue_reqs'], cacheUsage: ['sglang:token_usage'], running: ['sglang:num_running_reqs'] },
  tgi: { waiting: ['tgi_queue_size'], cacheUsage: [], running: ['tgi_batch_current_size'] },
  llamacpp: { waiting: ['llamacpp:requests_deferred'], cacheUsage: [], running: ['llamacpp:requests_processing'] },
};

export const LOAD_PRESET_NAMES = Object.keys(LOAD_PRESETS) as LoadPreset[];
