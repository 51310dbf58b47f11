// metrics.h — verl's per-step metrics (verl/trainer/ppo/metric_utils.py, verl/utils/flops_counter.py):
// data metrics (critic/*, response_length/*, prompt_length/*), timing_per_token_ms/*, perf/*.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

using Metrics = std::vector<std::pair<std::string, double>>;

/// critic/{score,rewards,advantages,returns[,values]}/{mean,max,min}, critic/vf_explained_var,
/// response_length/*, prompt_length/* (clip_ratio against the configured maxima).
Metrics compute_data_metrics(const RolloutBatch& batch, bool use_critic, int max_prompt_length,
                             int max_response_length);

/// timing_s/<phase> for each (phase, seconds), and timing_per_token_ms/<phase> (response tokens
/// for gen, prompt + response tokens for the others).
Metrics compute_timing_metrics(const RolloutBatch& batch,
                               const std::vector<std::pair<const char*, double>>& phase_seconds);

/// verl's FLOPs estimate for a Llama/Qwen2 decoder over sequences of the given lengths:
/// 6·N_dense·Σs + 6·Σs²·head_dim·heads·layers, N_dense = layers·(3·h·ffn + h·(q+k+v+o)) + 2·V·h.
double estimate_flops(const ModelShape& shape, const std::vector<std::int64_t>& sequence_lengths);

/// Dense GEMM rate (FLOP/s) of `dtype` on `device`: the best of a few n^3 products, n = 1024 on
/// the CPU (with the current thread settings; float32 is the MFU denominator there) and 8192 on
/// CUDA (synchronised around each timed batch; bf16 there, for devices the peak table of
/// device.h does not know).
double measure_gemm_flops(c10::Device device = c10::kCPU, c10::ScalarType dtype = c10::kFloat);

/// Resident memory of this process in GiB (/proc/self/statm).
double cpu_memory_used_gb();

/// Per-sequence total length (prompt + response real tokens).
std::vector<std::int64_t> sequence_lengths(const RolloutBatch& batch);

/// How a metric combines over ranks (docs/metrics.md): per-rank shares of the step's tokens,
/// throughput and MFU add up; phase times and peaks take the slowest rank; otherwise verl's rule —
/// names containing "max" by max, "min" by min, the rest by mean (ranks hold equal shares).
enum class Combine { kMean, kSum, kMax, kMin };
Combine combine_of(const std::string& name);

/// Every rank's metrics reduced over `world` by combine_of (names must match across ranks, as they
/// do for one config; DistError otherwise). Three small all_reduces per call. The `model_parallel`
/// = tp·pp ranks of one training replica report the same share of the batch, so sums count each
/// replica once.
Metrics reduce_metrics(const Metrics& metrics, Communicator& world, int model_parallel);

}  // namespace hs::trainer
