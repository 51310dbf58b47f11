// measured_cells.h — a benchmark matrix's cells as the step model's inputs and measured phase
// times, read through hs_reports (RunDatabase, summarize_matrix). bench may depend on reports
// (docs/architecture.md), and both are LibTorch-free, so hs_sim links hs_reports.
//
// Per cell: StepInputs from the first completed run's resolved config (step_inputs_from_config)
// and its recorded lengths and parameter bytes; per phase, timing_s/<phase> averaged over a run's
// measured steps (share/<phase> × step_s of bench_summary, which is exactly that mean), then the
// median over the cell's completed repetitions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hybridscope/bench/sim/step_calibration.h"

namespace hs::reports {
class RunDatabase;
}

namespace hs::bench::sim {

/// A run's resolved config key -> value (RunDatabase::config_value), nullopt when absent.
using ConfigLookup = std::function<std::optional<std::string>(const std::string& key)>;

/// What a run recorded besides its config: mean prompt and response lengths (tokens) and the
/// actor's parameter bytes (perf/actor_param_bytes).
struct RecordedShape {
  double prompt_length = 0;
  double response_length = 0;
  double actor_param_bytes = 0;
};

/// StepInputs of a run from verl's keys and hybridscope's model keys:
///   model        hybridscope.model.{hidden_size, intermediate_size, num_hidden_layers,
///                num_attention_heads, num_key_value_heads, vocab_size}; the parameter count from
///                the recorded bytes when there are any
///   dtype        hybridscope.precision (fp32: 4 bytes per weight, gradient and KV element)
///   batch        data.train_batch_size, actor_rollout_ref.rollout.n, recorded mean lengths
///   layouts      strategy fsdp: tp 1, pp 1, dp = ranks, FSDP gathers; megatron: actor.megatron.
///                {tensor,pipeline}_model_parallel_size, dp the rest, data-parallel all-reduce;
///                rollout tp = actor_rollout_ref.rollout.tensor_model_parallel_size
///   updates      ppo_mini_batch_size, ppo_micro_batch_size_per_gpu, log_prob_micro_batch_size_per_gpu,
///                ppo_epochs (resolve_batches derives the counts)
///   ref pass     actor.use_kl_loss or algorithm.use_kl_in_reward
///   switch       hybridscope.reshard.mode, tie_word_embeddings, the precision's bytes on the wire
///   critic       algorithm.adv_estimator gae; gradient checkpointing from the model key; a
///                reward model from reward_model.enable; actor.fsdp_config.optimizer_offload
///   vocabulary   hybridscope.model.vocab_size, or the tokenizer's (0), as the trainer takes it
/// hybridscope's own engine: FSDP gathers once per pass (ZeroShards), a replicated reference.
/// Placement is left to the caller (read_measured_cells: every rank on one host).
/// Throws SimError naming a missing or malformed key.
StepInputs step_inputs_from_config(const ConfigLookup& config, int ranks, const RecordedShape& recorded);

/// Every cell of matrix `matrix_id` (0: the newest) with at least one completed run. Throws
/// SimError when the matrix has none, reports::RunDatabaseError for a file it cannot read.
std::vector<MeasuredCell> read_measured_cells(const reports::RunDatabase& db, std::int64_t matrix_id = 0);

}  // namespace hs::bench::sim
