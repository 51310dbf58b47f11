// metrics.h — verl's per-step metrics (verl/trainer/ppo/metric_utils.py, verl/utils/flops_counter.py,
// verl/utils/seqlen_balancing.py): data metrics (critic/*, response_length/*, prompt_length/*),
// timing_per_token_ms/*, perf/*, global_seqlen/*.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/dist/parallel.h"
#include "hybridscope/trainer/dist/layout.h"

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
/// 6·N_dense·Σs + 6·Σs²·head_dim·heads·layers, N_dense = layers·(3·h·ffn + h·(q+k+v+o)) + 2·V·h
/// (hs::probes::training_flops, shared with the simulator; source and history in model_flops.h).
double estimate_flops(const ModelShape& shape, const std::vector<std::int64_t>& sequence_lengths);

/// Resident memory of this process in GiB (/proc/self/statm).
double cpu_memory_used_gb();

/// Per-sequence total length (prompt + response real tokens).
std::vector<std::int64_t> sequence_lengths(const RolloutBatch& batch);

/// verl's global_seqlen/* (log_seqlen_unbalance, verl/utils/seqlen_balancing.py, as ray_trainer's
/// _balance_batch calls it) for one step. `seqlens`: every sequence of the step's batch, prompt +
/// response tokens (the attention_mask sums), in batch order (prompt-major); `partitions`: the
/// sequences (indices into seqlens) each of the dp ranks trains on. Token totals per dp rank:
///   global_seqlen/{min, max}: of the contiguous split into partitions.size() equal shares (the
///     shares without balancing); minmax_diff = max - min; mean = Σ seqlens / dp;
///   global_seqlen/{balanced_min, balanced_max}: of `partitions`.
/// Throws std::invalid_argument when there is no partition or their count does not divide the
/// sequences (the trainer's shares are equal: data.train_batch_size % dp == 0).
Metrics seqlen_balance_metrics(const std::vector<std::int64_t>& seqlens,
                               const std::vector<std::vector<std::size_t>>& partitions);

/// perf/actor_param_bytes: Σ over the actor's parameters of numel x element size (the whole,
/// unsharded model in the dtype it trains in; LayoutSet::model_bytes), and
/// perf/actor_param_bytes_per_rank: the most bytes any rank of `training` holds (its tp/pp/fsdp
/// boxes; LayoutSet::rank_bytes). Bytes. The same on every rank (computed from the layout alone).
Metrics actor_param_metrics(const LayoutSet& training);

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
