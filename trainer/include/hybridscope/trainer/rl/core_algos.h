// core_algos.h — the RL math, in one place, with verl's names and semantics
// (verl/trainer/ppo/core_algos.py and verl/utils/torch_functional.py; see
// ../shared/anchors/verl-facts.md). Plain tensors in, plain tensors out; shapes are
// (bs, response_length) over response tokens unless stated. Works in any floating dtype; tests
// run it in float64 and float32.
//
// Masks keep their dtype, as in verl (whose trainer passes response_mask as int64, or bool in its
// engine path): with an integer or bool mask, torch does `mask.sum() + 1e-8` and the Bessel factor
// N/(N-1) in its default float32 — the epsilon vanishes, the factor is a float32 number — and the
// 0/1 clip fractions are float32 values. A float mask keeps everything in its dtype. The code below
// therefore never casts a mask to the values' dtype where that would change a result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

// ---- masked statistics (verl torch_functional) ----
/// Σ where(m, v, 0)·m over every element (axis = nullopt, verl's axis=None) or along `axis`
/// (-1: per row, 0: per column). Masked-off values are zeroed before the product, so a NaN or
/// inf in padding never reaches the sum.
torch::Tensor masked_sum(const torch::Tensor& values, const torch::Tensor& mask,
                         std::optional<int64_t> axis = std::nullopt);
/// masked_sum / (Σ m + 1e-8), the sum of the mask taken in the mask's dtype (float32 for an
/// integer or bool mask, where the epsilon vanishes for Σ m >= 1).
torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask,
                          std::optional<int64_t> axis = std::nullopt);
/// masked_mean((v − masked_mean(v))²) over the whole tensor, times N/(N−1) when unbiased with
/// N = Σ m (a float32 number for an integer or bool mask, as torch's int/int division gives);
/// throws std::invalid_argument when unbiased and N <= 1.
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
/// GRPO pass@k (Chen et al. 2025, arXiv 2503.19595; verl "grpo_passk"): in each group only the
/// best response gets a non-zero advantage, r_max − r_second_max, divided by (group std + ε) when
/// norm_adv_by_std_in_grpo. Throws std::invalid_argument for a group of fewer than 2 samples.
AdvantageReturn compute_grpo_passk_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                     const torch::Tensor& response_mask,
                                                     const std::vector<int64_t>& index,
                                                     double epsilon = 1e-6,
                                                     bool norm_adv_by_std_in_grpo = true);
/// OPO (Hao et al. 2025, arXiv 2505.23585; verl "opo"): score − the group's length-weighted mean
/// score Σ|y_j|·s_j / Σ|y_j| (|y| = Σ_t m); a group of one keeps its score.
AdvantageReturn compute_opo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const std::vector<int64_t>& index);
/// GPG (Chu et al. 2025, arXiv 2504.02546; verl "gpg"): α·(score − group mean)/f_norm with
/// α = bs / max(1, #non-zero scores) as a float32 number (torch's int/int division) and
/// f_norm = 1; a group of one has mean 0.
AdvantageReturn compute_gpg_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const std::vector<int64_t>& index, double f_norm = 1.0);
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
/// verl's `global_batch_info` (ActorConfig.global_batch_info): what a micro-batch's loss is
/// normalised by so that, with gradients averaged over the data-parallel group (as FSDP and the
/// Optimizer here do), the result is the loss of the whole global mini-batch. Empty: the
/// micro-batch's own counts and dp_size 1.
struct GlobalBatchInfo {
  int64_t dp_size = 1;                      // data-parallel ranks whose gradients are averaged
  std::optional<double> batch_num_tokens;   // valid tokens of the global mini-batch (token-mean)
  std::optional<double> global_batch_size;  // sequences with a valid token in it (seq-mean-*)
  std::optional<double> loss_scale_factor;  // seq-mean-token-sum-norm divisor; default T
};

/// Aggregates a (bs, T) loss matrix (verl agg_loss):
///   token-mean:              masked_sum(l, m) / N · dp_size, N = batch_num_tokens or Σ m (no ε)
///   seq-mean-token-sum:      Σ_valid rows (Σ_t l·m) / B · dp_size
///   seq-mean-token-mean:     Σ_valid rows (Σ_t l·m / (Σ_t m + 1e-8)) / B · dp_size
///   seq-mean-token-sum-norm: Σ l·m / loss_scale_factor (default T = loss_mat.size(1)); no dp_size
/// B = global_batch_size or the number of rows with a valid token. One deviation from verl: a
/// zero count (an all-masked micro-batch without global info) gives 0 instead of 0/0 = NaN.
torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask, LossAggMode mode,
                       const GlobalBatchInfo& info = {});

struct PolicyLossOutput {
  torch::Tensor pg_loss;            // scalar
  // Metrics, detached; undefined where the loss mode has none (verl returns no such key).
  torch::Tensor pg_clipfrac;        // scalar
  torch::Tensor ppo_kl;             // scalar
  torch::Tensor pg_clipfrac_lower;  // scalar
};
/// Vanilla PPO clipped objective with dual clip (clip_ratio_c > 1) — verl
/// compute_policy_loss_vanilla. `rollout_is_weights` (bs, T), when defined, multiplies the
/// per-token loss after all clipping (rollout correction); the clip metrics ignore it.
PolicyLossOutput compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                     const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                     double clip_ratio_low, double clip_ratio_high, double clip_ratio_c,
                                     LossAggMode loss_agg_mode, const GlobalBatchInfo& info = {},
                                     const torch::Tensor& rollout_is_weights = {});

/// GSPO (Zheng et al. 2025, arXiv 2507.18071; verl loss_mode "gspo"): the sequence-level ratio
/// s_i = exp(Σ_t Δ_it·m_it / max(1, Σ_t m_it)), Δ = logp − old_logp, applied per token as
/// s_it = exp(min(10, logp − sg[logp] + sg[log s_i])) — equal to s_i in value, with the gradient
/// of the token's own log-prob. Loss max(−A·s_it, −A·clip(s_it, 1−ε_low, 1+ε_high)), aggregated
/// with seq-mean-token-mean whatever loss_agg_mode says (as verl does). pg_clipfrac_lower is 0.
PolicyLossOutput compute_policy_loss_gspo(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                          const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                          double clip_ratio_low, double clip_ratio_high,
                                          const GlobalBatchInfo& info = {},
                                          const torch::Tensor& rollout_is_weights = {});
/// GPG (arXiv 2504.02546; verl loss_mode "gpg"): −logp·A aggregated by loss_agg_mode, no ratio
/// and no clipping; no metrics.
PolicyLossOutput compute_policy_loss_gpg(const torch::Tensor& log_prob, const torch::Tensor& advantages,
                                         const torch::Tensor& response_mask, LossAggMode loss_agg_mode,
                                         const GlobalBatchInfo& info = {},
                                         const torch::Tensor& rollout_is_weights = {});
/// Clip-Cov (Cui et al. 2025, arXiv 2505.22617; verl loss_mode "clip_cov"): the PPO loss
/// max(−A·ρ, −A·clip(ρ)) (ρ = exp(Δ), unclamped, no dual clip), with the gradient cut (the token's
/// loss multiplied by 0) on up to max(1, ⌊clip_cov_ratio·Σm⌋) tokens drawn at random (`generator`,
/// or torch's default) among the valid, not already clipped tokens whose centred covariance
/// (A − mean A)·(logp − mean logp) lies in (clip_cov_lb, clip_cov_ub). pg_clipfrac is the share
/// of cut tokens; no pg_clipfrac_lower.
PolicyLossOutput compute_policy_loss_clip_cov(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                              const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                              double clip_ratio_low, double clip_ratio_high, double clip_cov_ratio,
                                              double clip_cov_lb, double clip_cov_ub, LossAggMode loss_agg_mode,
                                              const GlobalBatchInfo& info = {},
                                              const torch::Tensor& rollout_is_weights = {},
                                              std::optional<at::Generator> generator = std::nullopt);
/// KL-Cov (arXiv 2505.22617; verl loss_mode "kl_cov"): −A·ρ (ρ = exp(Δ), unclamped, no clipping),
/// plus ppo_kl_coef·|Δ| on the max(1, ⌊kl_cov_ratio·#valid⌋) valid tokens with the largest
/// centred covariance (A − mean A)·(logp − mean logp) (plain means over valid tokens). ppo_kl is
/// masked_mean(|Δ|); no clip fractions.
PolicyLossOutput compute_policy_loss_kl_cov(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                            const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                            double kl_cov_ratio, double ppo_kl_coef, LossAggMode loss_agg_mode,
                                            const GlobalBatchInfo& info = {},
                                            const torch::Tensor& rollout_is_weights = {});
/// The loss that actor.policy_loss.loss_mode selects (verl get_policy_loss_fn), with the actor
/// section's clip ratios, loss_agg_mode and policy_loss parameters.
PolicyLossOutput compute_policy_loss_for_mode(const ActorConfig& actor, const torch::Tensor& old_log_prob,
                                              const torch::Tensor& log_prob, const torch::Tensor& advantages,
                                              const torch::Tensor& response_mask, const GlobalBatchInfo& info = {},
                                              const torch::Tensor& rollout_is_weights = {});

struct ValueLossOutput {
  torch::Tensor vf_loss;      // scalar, already multiplied by 0.5
  torch::Tensor vf_clipfrac;  // scalar
};
/// vf_loss = ½·agg(max((v − R)², (v_clipped − R)²)); `info` as in agg_loss (verl's trainer
/// passes its global batch info to the critic's aggregation the same way).
ValueLossOutput compute_value_loss(const torch::Tensor& vpreds, const torch::Tensor& returns,
                                   const torch::Tensor& values, const torch::Tensor& response_mask,
                                   double cliprange_value, LossAggMode loss_agg_mode,
                                   const GlobalBatchInfo& info = {});

torch::Tensor compute_entropy_loss(const torch::Tensor& logits, const torch::Tensor& response_mask,
                                   LossAggMode loss_agg_mode, const GlobalBatchInfo& info = {});

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
