// core_algos.h — the RL math, in one place, with verl's names and semantics
// (verl/trainer/ppo/core_algos.py and verl/utils/torch_functional.py; see
// ../shared/anchors/verl-facts.md). Plain tensors in, plain tensors out; shapes are
// (bs, response_length) over response tokens unless stated. Works in any floating dtype; tests
// run it in float64.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

// ---- masked statistics (verl torch_functional) ----
torch::Tensor masked_sum(const torch::Tensor& values, const torch::Tensor& mask);
/// Σ v·m / (Σ m + 1e-8); with dim >= 0, along that dim.
torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask, int64_t dim = -1,
                          bool all = true);
/// Unbiased variance of the masked values; throws std::invalid_argument when Σ m <= 1.
torch::Tensor masked_var(const torch::Tensor& values, const torch::Tensor& mask, bool unbiased = true);
/// (v − mean)·rsqrt(var + 1e-8); mean added back when !shift_mean.
torch::Tensor masked_whiten(const torch::Tensor& values, const torch::Tensor& mask, bool shift_mean = true);
/// logsumexp(z) − Σ softmax(z)·z over the last dim.
torch::Tensor entropy_from_logits(const torch::Tensor& logits);
/// log_softmax(logits)[labels]: logits (..., V), labels (...) → (...).
torch::Tensor logprobs_from_logits(const torch::Tensor& logits, const torch::Tensor& labels);

// ---- advantage estimators ----
struct AdvantageReturn {
  torch::Tensor advantages;  // (bs, T)
  torch::Tensor returns;     // (bs, T)
};

AdvantageReturn compute_gae_advantage_return(const torch::Tensor& token_level_rewards,
                                             const torch::Tensor& values,
                                             const torch::Tensor& response_mask, double gamma,
                                             double lam);
/// `index` holds each sample's group id (the prompt uid).
AdvantageReturn compute_grpo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                               const torch::Tensor& response_mask,
                                               const std::vector<int64_t>& index,
                                               double epsilon = 1e-6,
                                               bool norm_adv_by_std_in_grpo = true);
AdvantageReturn compute_rloo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                               const torch::Tensor& response_mask,
                                               const std::vector<int64_t>& index,
                                               double epsilon = 1e-6);
AdvantageReturn compute_reinforce_plus_plus_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                              const torch::Tensor& response_mask,
                                                              double gamma);
AdvantageReturn compute_reinforce_plus_plus_baseline_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask,
    const std::vector<int64_t>& index, double epsilon = 1e-6);
/// reward_baselines: (bs) scores of the greedy samples.
AdvantageReturn compute_remax_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                const torch::Tensor& reward_baselines,
                                                const torch::Tensor& response_mask);

// ---- losses ----
/// Aggregates a (bs, T) loss matrix by `mode`; seq-mean-token-sum-norm divides by `norm` (the
/// max response length when <= 0: loss_mat.size(1)). Sequences with no valid token do not count
/// in sequence means.
torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask, LossAggMode mode,
                       double norm = -1);

struct PolicyLossOutput {
  torch::Tensor pg_loss;            // scalar
  torch::Tensor pg_clipfrac;        // scalar
  torch::Tensor ppo_kl;             // scalar
  torch::Tensor pg_clipfrac_lower;  // scalar
};
/// Vanilla PPO clipped objective with dual clip (clip_ratio_c > 1).
PolicyLossOutput compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                     const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                     double clip_ratio_low, double clip_ratio_high, double clip_ratio_c,
                                     LossAggMode loss_agg_mode);

struct ValueLossOutput {
  torch::Tensor vf_loss;      // scalar, already multiplied by 0.5
  torch::Tensor vf_clipfrac;  // scalar
};
ValueLossOutput compute_value_loss(const torch::Tensor& vpreds, const torch::Tensor& returns,
                                   const torch::Tensor& values, const torch::Tensor& response_mask,
                                   double cliprange_value, LossAggMode loss_agg_mode);

torch::Tensor compute_entropy_loss(const torch::Tensor& logits, const torch::Tensor& response_mask,
                                   LossAggMode loss_agg_mode);

/// Per-token KL estimate between logprob and ref_logprob (bs, T).
torch::Tensor kl_penalty(const torch::Tensor& logprob, const torch::Tensor& ref_logprob, KlPenalty kind);

// ---- KL controllers ----
class KlController {
 public:
  virtual ~KlController() = default;
  virtual double value() const = 0;
  virtual void update(double current_kl, int64_t n_steps) = 0;
  virtual void set_value(double v) = 0;  // for checkpoint restore
};
/// β constant.
class FixedKlController final : public KlController {
 public:
  explicit FixedKlController(double kl_coef) : value_(kl_coef) {}
  double value() const override { return value_; }
  void update(double, int64_t) override {}
  void set_value(double v) override { value_ = v; }

 private:
  double value_;
};
/// β ← β·(1 + clip(kl/target − 1, −0.2, 0.2)·n_steps/horizon) (Ziegler et al.).
class AdaptiveKlController final : public KlController {
 public:
  AdaptiveKlController(double init_kl_coef, double target_kl, int64_t horizon);
  double value() const override { return value_; }
  void update(double current_kl, int64_t n_steps) override;
  void set_value(double v) override { value_ = v; }

 private:
  double value_;
  double target_;
  int64_t horizon_;
};
std::unique_ptr<KlController> make_kl_controller(const KlCtrlConfig& config);

struct KlInRewardOutput {
  torch::Tensor token_level_rewards;  // scores − β·kl·mask
  double current_kl = 0;              // batch mean of the per-sequence mean KL
};
/// verl apply_kl_penalty: KL in the reward; updates the controller with current_kl.
KlInRewardOutput apply_kl_penalty(const torch::Tensor& token_level_scores, const torch::Tensor& old_log_prob,
                                  const torch::Tensor& ref_log_prob, const torch::Tensor& response_mask,
                                  KlController& controller, KlPenalty kind);

}  // namespace hs::trainer
