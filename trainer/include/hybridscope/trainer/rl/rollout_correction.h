// rollout_correction.h — the rollout/training mismatch, measured and corrected, with verl's names
// and semantics (verl/trainer/ppo/rollout_corr_helper.py: compute_rollout_correction_and_rejection_mask,
// compute_offpolicy_metrics; ray_trainer's training/rollout_probs_diff_*).
//
// hybridscope generates in one layout and precision (the reshard, bf16 rollout weights, the paged
// decode kernel) and trains in another, so the rollout engine's log-probabilities of the tokens it
// sampled (RolloutBatch::rollout_log_probs) differ from the training pass's (old_log_probs). With
// log ratio r = old − rollout (log π_train/π_rollout), every step records:
//   training/rollout_probs_diff_{max,mean,std}   |exp(old) − exp(rollout)| over response tokens (std unbiased)
//   training/rollout_actor_probs_pearson_corr    Pearson correlation of the two probabilities
//   rollout_corr/{training_ppl, training_log_ppl, kl, k3_kl, rollout_ppl, rollout_log_ppl,
//     log_ppl_diff, log_ppl_abs_diff, log_ppl_diff_max, log_ppl_diff_min, ppl_ratio, chi2_token,
//     chi2_seq}                                  compute_offpolicy_metrics
// and when algorithm.rollout_correction asks (decoupled mode: IS from π_rollout to π_old):
//   IS weights   token: exp(clamp(r, ±20)); sequence: exp(clamp(Σ r, ±20)) on every token; zeroed
//                on padding, truncated at rollout_is_threshold (TIS), detached, optionally
//                batch-normalised to mean 1; rollout_corr/rollout_is_* statistics (before truncation)
//   rejection    token / sequence / geometric (exp of the masked mean of r) ratios outside
//                [lower, upper] (lower = 1/upper unless set) leave the response mask; rollout_rs_*
//   veto         a sequence with any token ratio below rollout_token_veto_threshold leaves it too
// The weights multiply the per-token policy loss after clipping (compute_policy_loss), the
// modified mask replaces the response mask for the update. Not here: verl's bypass mode and pure
// policy-gradient loss (old_log_prob is always computed here).
#pragma once

#include <torch/types.h>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rl/metrics.h"

namespace hs::trainer {

/// training/rollout_probs_diff_* and training/rollout_actor_probs_pearson_corr (none when the
/// mask has no token), then rollout_corr/* of compute_offpolicy_metrics. Tensors (B, T).
Metrics rollout_mismatch_metrics(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                                 const torch::Tensor& response_mask);

struct RolloutCorrection {
  torch::Tensor is_weights;     // (B, T), undefined when rollout_is is null
  torch::Tensor response_mask;  // (B, T): the input mask with rejected tokens/sequences set to 0
  Metrics metrics;              // rollout_corr/rollout_is_*, rollout_rs_*, veto fractions
};

/// verl's compute_rollout_correction_and_rejection_mask (without the off-policy metrics, which
/// rollout_mismatch_metrics records). Throws std::invalid_argument on a mask without tokens or a
/// shape mismatch.
RolloutCorrection compute_rollout_correction(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                                             const torch::Tensor& response_mask, const RolloutCorrectionConfig& config);

}  // namespace hs::trainer
