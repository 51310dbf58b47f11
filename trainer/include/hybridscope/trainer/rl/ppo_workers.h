// ppo_workers.h — the actor and the critic (verl's DataParallelPPOActor / DataParallelPPOCritic):
// forward passes over micro-batches for log-probs and values, and the PPO updates with mini-batches,
// ppo_epochs, gradient accumulation over micro-batches, gradient clipping, AdamW and the LR
// schedule. Parallelism comes in through ParallelContext: data parallel (each rank its share of the
// batch, gradients summed over dp with global weights) with replicated parameters or, with
// parallel.dp_sharding = kSharded, ZeRO-3 shards (zero.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/dist/parallel.h"

namespace hs::trainer {

class ZeroShards;  // zero.h

/// LR multiplier at optimizer step `step` (0-based): linear warm-up, then constant or cosine down
/// to min_lr_ratio (verl's get_constant/cosine_schedule_with_warmup).
double lr_multiplier(const OptimConfig& optim, std::int64_t step, std::int64_t total_steps);

/// AdamW over a module's parameters with verl's schedule and global-norm clipping. The clipping
/// norm is the whole model's: tp-split gradients summed over tp, stages summed over pp.
/// Along dp (parallel.dp_sharding, from actor.strategy; one dp rank is the same either way):
///   kReplicated (megatron): step() first all-reduces the gradients over dp;
///   kSharded (fsdp): the parameters live as ZeroShards (zero.h) and AdamW steps this rank's row
///     blocks; step() reduce-scatters the gradients into them and the norm's squares are summed over
///     dp. The module holds no parameter storage between uses: gather it with
///     `ZeroShards::Scope full(optimizer.zero_shards())` around each forward/backward.
class Optimizer {
 public:
  Optimizer(torch::nn::Module& module, const OptimConfig& optim, double grad_clip, std::int64_t total_steps,
            ParallelContext parallel);
  void zero_grad();
  /// Clips, steps when the norm is finite; returns the pre-clip gradient norm.
  double step();
  /// Applies the schedule for training step `step` (called once per training step).
  void set_schedule_step(std::int64_t step);
  double lr() const;
  torch::optim::AdamW& adamw() { return *adamw_; }
  /// The fsdp shards, or nullptr (replicated parameters, or one dp rank).
  ZeroShards* zero_shards() const { return zero_.get(); }
  /// What AdamW steps: the module's parameters, or with fsdp this rank's shards (the master weights).
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  /// AdamW's per-parameter state tensors (exp_avg, exp_avg_sq, max_exp_avg_sq with amsgrad); empty
  /// before the first step.
  std::vector<torch::Tensor> state_tensors() const;
  /// hybridscope.fused_adamw: step() updates every parameter with one call of ATen's fused AdamW
  /// (`_fused_adamw_`: multi-tensor kernels on CUDA, a vectorised loop on CPU) instead of
  /// LibTorch's AdamW, ~10 ops per parameter. The same math and the same state (adamw()'s, so
  /// checkpoints and state_tensors() see it); the two may be switched between steps.
  void set_fused(bool fused) { fused_ = fused; }
  bool fused() const { return fused_; }

 private:
  std::shared_ptr<ZeroShards> zero_;
  std::vector<torch::Tensor> params_;  // what AdamW steps: the module's parameters or zero_'s shards
  std::vector<bool> tp_split_;  // per parameter: split over the tp group (column/row-parallel)
  OptimConfig optim_;
  double grad_clip_;
  std::int64_t total_steps_;
  ParallelContext parallel_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
  void fused_step();
  bool fused_ = false;
  /// Fused path: per parameter, its step count as the float32 tensor the kernel reads (on the
  /// parameter's device) and the count that tensor holds; refilled when adamw()'s state says
  /// otherwise (a checkpoint loaded, or steps taken unfused).
  std::vector<torch::Tensor> fused_steps_;
  std::vector<std::int64_t> fused_counts_;
};

/// Splits `batch_size` rows into micro-batches of `micro` (whole batch when micro <= 0).
std::vector<std::vector<std::int64_t>> split_rows(std::int64_t batch_size, std::int64_t micro);

/// Micro-batches under a token budget (use_dynamic_bsz, ppo_max_token_len_per_gpu): rows (real
/// tokens from `attention_mask` (B, T)) are spread over the fewest partitions whose totals fit the
/// budget, longest first into the lightest partition (a balanced partition in the spirit of verl's
/// Karmarkar-Karp). A row longer than the budget gets a partition of its own.
std::vector<std::vector<std::int64_t>> split_rows_by_tokens(const torch::Tensor& attention_mask,
                                                            std::int64_t max_tokens);

/// trainer.balance_batch (verl's get_seqlen_balanced_partitions with equal_size): `weights` (e.g.
/// the tokens of each GRPO group) into `parts` partitions of equal count (weights.size() / parts;
/// the size must divide), heaviest first into the lightest partition that still has room, so the
/// partitions' totals differ by at most the largest weight. Each partition ascending; the same
/// result on every rank for the same input. Throws std::invalid_argument when parts does not divide.
std::vector<std::vector<std::size_t>> balanced_equal_partitions(const std::vector<std::int64_t>& weights, int parts);

/// Response log-probs and entropy of `model` on `batch`: logits / temperature at the positions
/// that predict each response token. Each (B, R).
std::pair<torch::Tensor, torch::Tensor> response_log_probs(Transformer& model, const RolloutBatch& batch,
                                                           double temperature, bool with_entropy);
/// The same from the model's logits (B, P+R, V) on `batch`: the reference computation the chunked
/// path below is tested against (it holds the whole micro-batch's logits).
std::pair<torch::Tensor, torch::Tensor> response_log_probs_of_logits(const torch::Tensor& logits,
                                                                     const RolloutBatch& batch, double temperature,
                                                                     bool with_entropy);
/// The same from the last stage's final hidden states (B, P+R, C) (forward with LmOutput::kHidden):
/// the head is applied only at the R response-predicting positions, in chunks of tokens
/// (TransformerImpl::token_log_probs), so memory is bounded by B·R·C, not B·(P+R)·V.
std::pair<torch::Tensor, torch::Tensor> response_log_probs_of_hidden(Transformer& model, const torch::Tensor& hidden,
                                                                     const RolloutBatch& batch, double temperature,
                                                                     bool with_entropy);
/// Critic values at the positions of the response tokens (values[:, P-1 : P+R-1]), (B, R).
torch::Tensor response_values(Transformer& model, const RolloutBatch& batch);

class PPOActor {
 public:
  PPOActor(Transformer model, const ActorConfig& config, double temperature, int rollout_n,
           std::int64_t total_steps, ParallelContext parallel = {});

  /// Old (behaviour) log-probs, no gradient, in micro-batches of `micro` samples; with pipeline
  /// stages on every rank of the pp group (micro_batched_log_probs, pipeline.h).
  torch::Tensor compute_log_prob(const RolloutBatch& batch, std::int64_t micro);
  /// ppo_epochs over mini-batches (shuffled with `shuffle_seed` when actor.shuffle); `step` is the
  /// 0-based schedule step. Returns actor/* metrics averaged over micro-batches. With pipeline
  /// stages each mini-batch's micro-batches run in the 1F1B order (pipeline.h); the losses are
  /// computed on the last stage and the metrics broadcast over pp, so every rank returns the same.
  Metrics update_policy(const RolloutBatch& batch, std::int64_t step, std::uint64_t shuffle_seed);

  Transformer& model() { return model_; }
  Optimizer& optimizer() { return optimizer_; }

 private:
  Transformer model_;
  ActorConfig config_;
  double temperature_;
  int rollout_n_;
  ParallelContext parallel_;
  Optimizer optimizer_;
};

/// Whole models only (pp = 1): the constructor refuses a pipeline stage.
class PPOCritic {
 public:
  PPOCritic(Transformer model, const CriticConfig& config, int rollout_n, std::int64_t total_steps,
            ParallelContext parallel = {});

  torch::Tensor compute_values(const RolloutBatch& batch, std::int64_t micro);
  Metrics update_critic(const RolloutBatch& batch, std::int64_t step);

  Transformer& model() { return model_; }
  Optimizer& optimizer() { return optimizer_; }

 private:
  Transformer model_;
  CriticConfig config_;
  int rollout_n_;
  ParallelContext parallel_;
  Optimizer optimizer_;
};

/// verl's global batch info of a mini-batch whose rows are spread over `dp`: its valid tokens and
/// its sequences with a valid token, summed over dp (one all_reduce when dp has more than one
/// rank), dp_size, and loss_scale_factor when > 0 (else agg_loss's default, the padded length).
/// Passed to agg_loss for every micro-batch, it makes Σ_micro-batches mean_over_dp of the losses
/// the loss of the whole mini-batch (core_algos.h).
GlobalBatchInfo global_batch_info(const torch::Tensor& mini_mask, Communicator& dp, double loss_scale_factor);

/// Whether `mask` selects any token (a micro-batch without one contributes exactly 0).
bool has_valid_token(const torch::Tensor& mask);

}  // namespace hs::trainer
