// rollout_correction.cpp — verl's rollout correction and off-policy metrics (rollout_correction.h),
// in verl's order of operations and dtypes so that the numbers agree with its helper to float32's
// last bits (tests/trainer/rl/rollout_correction_test.cpp checks against a torch re-implementation).
#include "hybridscope/trainer/rl/rollout_correction.h"

#include "hybridscope/trainer/rl/core_algos.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace hs::trainer {

namespace {

// exp(±20): verl's SAFETY_BOUND on log ratios before exponentiating.
constexpr double kSafetyBound = 20.0;

double item(const torch::Tensor& t) { return t.item<double>(); }

void check(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob, const torch::Tensor& mask) {
  if (!mask.to(torch::kBool).any().item<bool>())
    throw std::invalid_argument("rollout correction: the response mask has no valid token");
  if (old_log_prob.sizes() != rollout_log_prob.sizes() || old_log_prob.sizes() != mask.sizes()) {
    std::ostringstream what;
    what << "rollout correction: old_log_prob " << old_log_prob.sizes() << ", rollout_log_prob "
         << rollout_log_prob.sizes() << " and the response mask " << mask.sizes() << " must have one shape";
    throw std::invalid_argument(what.str());
  }
}

// compute_is_metrics / compute_rs_metrics: the same statistics of `weights` under two prefixes.
void weight_metrics(const std::string& prefix, const torch::Tensor& weights, const torch::Tensor& log_ratio_for_metrics,
                    const torch::Tensor& mask, bool sequence_level, double upper, double lower, Metrics& out) {
  const auto options = torch::TensorOptions().dtype(weights.dtype());
  const auto log_upper = torch::log(torch::tensor(upper, options));
  const auto log_lower = torch::log(torch::tensor(lower, options));
  if (sequence_level) {
    out.emplace_back(prefix + "_max", item(torch::exp(torch::clamp_max(log_ratio_for_metrics.max(), kSafetyBound))));
    out.emplace_back(prefix + "_min", item(torch::exp(log_ratio_for_metrics.min())));
    out.emplace_back(prefix + "_mean", item(masked_mean(weights, mask)));
    out.emplace_back(prefix + "_ratio_fraction_high", item((log_ratio_for_metrics > log_upper).to(torch::kFloat).mean()));
    out.emplace_back(prefix + "_ratio_fraction_low", item((log_ratio_for_metrics < log_lower).to(torch::kFloat).mean()));
  } else {
    out.emplace_back(prefix + "_mean", item(masked_mean(weights, mask)));
    out.emplace_back(prefix + "_ratio_fraction_high", item(masked_mean((weights > upper).to(torch::kFloat), mask)));
    out.emplace_back(prefix + "_ratio_fraction_low", item(masked_mean((weights < lower).to(torch::kFloat), mask)));
    const auto valid = mask.to(torch::kBool);
    out.emplace_back(prefix + "_max",
                     item(weights.masked_fill(~valid, -std::numeric_limits<double>::infinity()).max()));
    out.emplace_back(prefix + "_min", item(weights.masked_fill(~valid, std::numeric_limits<double>::infinity()).min()));
  }
  const auto clamped = weights.clamp(lower, upper);
  if (item(mask.sum()) > 1) {
    const auto mean = masked_mean(clamped, mask);
    const auto var = masked_mean(clamped.square(), mask) - mean.square();
    out.emplace_back(prefix + "_std", item(torch::sqrt(torch::clamp_min(var, 0.0))));
  } else {
    out.emplace_back(prefix + "_std", 0.0);
  }
  const auto normalized = clamped / (masked_mean(clamped, mask) + 1e-8);
  out.emplace_back(prefix + "_eff_sample_size", 1.0 / item(masked_mean(normalized.square(), mask)));
  const auto seq_mean = masked_mean(weights, mask, -1);
  out.emplace_back(prefix + "_seq_mean", item(seq_mean.mean()));
  out.emplace_back(prefix + "_seq_std", seq_mean.numel() > 1 ? item(seq_mean.std()) : 0.0);
  out.emplace_back(prefix + "_seq_max", item(seq_mean.max()));
  out.emplace_back(prefix + "_seq_min", item(seq_mean.min()));
  out.emplace_back(prefix + "_seq_max_deviation", item((seq_mean - 1.0).abs().max()));
  out.emplace_back(prefix + "_seq_fraction_high", item((seq_mean > upper).to(torch::kFloat).mean()));
  out.emplace_back(prefix + "_seq_fraction_low", item((seq_mean < lower).to(torch::kFloat).mean()));
}

// The ratio of `level` (token: per token; sequence: exp(Σ r) per row; geometric: exp(mean r) per
// row), safety-bounded, on every token; and the log ratio the metrics read (before the bound).
std::pair<torch::Tensor, torch::Tensor> level_ratio(const torch::Tensor& log_ratio, const torch::Tensor& mask,
                                                    RolloutCorrectionLevel level) {
  if (level == RolloutCorrectionLevel::kToken)
    return {torch::exp(torch::clamp(log_ratio, -kSafetyBound, kSafetyBound)), log_ratio};
  const auto per_row = (level == RolloutCorrectionLevel::kSequence ? masked_sum(log_ratio, mask, -1)
                                                                     : masked_mean(log_ratio, mask, -1))
                           .unsqueeze(-1);
  return {torch::exp(torch::clamp(per_row, -kSafetyBound, kSafetyBound)).expand_as(log_ratio), per_row};
}

}  // namespace

Metrics rollout_mismatch_metrics(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                                 const torch::Tensor& response_mask) {
  torch::NoGradGuard no_grad;
  check(old_log_prob, rollout_log_prob, response_mask);
  Metrics out;
  const auto valid = response_mask.to(torch::kBool);
  const auto rollout_probs = torch::exp(rollout_log_prob), actor_probs = torch::exp(old_log_prob);
  const auto diff = torch::masked_select(torch::abs(rollout_probs - actor_probs), valid);
  out.emplace_back("training/rollout_probs_diff_max", item(diff.max()));
  out.emplace_back("training/rollout_probs_diff_mean", item(diff.mean()));
  if (diff.numel() > 1) out.emplace_back("training/rollout_probs_diff_std", item(diff.std()));
  if (diff.numel() > 1) {
    // Pearson correlation of the masked probabilities (np.corrcoef), in float64.
    const auto a = torch::masked_select(actor_probs, valid).to(torch::kDouble);
    const auto b = torch::masked_select(rollout_probs, valid).to(torch::kDouble);
    const auto da = a - a.mean(), db = b - b.mean();
    const double denominator = std::sqrt(item(da.square().sum()) * item(db.square().sum()));
    if (denominator > 0) out.emplace_back("training/rollout_actor_probs_pearson_corr", item((da * db).sum()) / denominator);
  }

  // compute_offpolicy_metrics.
  const auto mean_training = masked_mean(old_log_prob, response_mask, -1);  // (B)
  out.emplace_back("rollout_corr/training_ppl", item(torch::exp(-mean_training).mean()));
  out.emplace_back("rollout_corr/training_log_ppl", item((-mean_training).mean()));
  out.emplace_back("rollout_corr/kl", item(masked_mean(rollout_log_prob - old_log_prob, response_mask)));
  const auto log_ratio = old_log_prob - rollout_log_prob;
  out.emplace_back("rollout_corr/k3_kl", item(masked_mean(torch::exp(log_ratio) - log_ratio - 1, response_mask)));
  const auto mean_rollout = masked_mean(rollout_log_prob, response_mask, -1);
  out.emplace_back("rollout_corr/rollout_ppl", item(torch::exp(-mean_rollout).mean()));
  out.emplace_back("rollout_corr/rollout_log_ppl", item((-mean_rollout).mean()));
  const auto log_ppl_diff = mean_rollout - mean_training;
  out.emplace_back("rollout_corr/log_ppl_diff", item(log_ppl_diff.mean()));
  out.emplace_back("rollout_corr/log_ppl_abs_diff", item(log_ppl_diff.abs().mean()));
  out.emplace_back("rollout_corr/log_ppl_diff_max", item(log_ppl_diff.max()));
  out.emplace_back("rollout_corr/log_ppl_diff_min", item(log_ppl_diff.min()));
  out.emplace_back("rollout_corr/ppl_ratio", item(torch::exp(log_ppl_diff).mean()));
  const auto rho = torch::exp(torch::clamp(log_ratio, -kSafetyBound, kSafetyBound));
  out.emplace_back("rollout_corr/chi2_token", item(masked_mean(rho.square(), response_mask) - 1.0));
  const auto log_ratio_sum = torch::clamp(masked_sum(log_ratio, response_mask, -1), -kSafetyBound, kSafetyBound);
  out.emplace_back("rollout_corr/chi2_seq", item(torch::exp(2.0 * log_ratio_sum).mean() - 1.0));
  return out;
}

RolloutCorrection compute_rollout_correction(const torch::Tensor& old_log_prob, const torch::Tensor& rollout_log_prob,
                                             const torch::Tensor& response_mask, const RolloutCorrectionConfig& config) {
  torch::NoGradGuard no_grad;
  check(old_log_prob, rollout_log_prob, response_mask);
  RolloutCorrection out;
  Metrics metrics;
  const auto log_ratio = old_log_prob - rollout_log_prob;

  if (config.rollout_is != RolloutCorrectionLevel::kNull) {
    const double upper = config.rollout_is_threshold, lower = 1.0 / upper;
    auto [weights, for_metrics] = level_ratio(log_ratio, response_mask, config.rollout_is);
    weights = weights * response_mask;  // zero on padding
    weight_metrics("rollout_is", weights, for_metrics, response_mask,
                   config.rollout_is == RolloutCorrectionLevel::kSequence, upper, lower, metrics);
    weights = weights.clamp_max(upper);  // TIS
    if (config.rollout_is_batch_normalize) {
      torch::Tensor mean;
      if (config.rollout_is == RolloutCorrectionLevel::kToken) {
        mean = masked_mean(weights, response_mask);
      } else {
        const auto seq_weights = masked_mean(weights, response_mask, -1);
        const auto seq_mask = (response_mask.sum(-1) > 0).to(weights.dtype());
        mean = (seq_weights * seq_mask).sum() / seq_mask.sum().clamp_min(1e-8);
      }
      if (item(mean) > 1e-8) {
        weights = weights / mean;
        metrics.emplace_back("rollout_is_batch_norm_factor", item(mean));
      } else {
        metrics.emplace_back("rollout_is_batch_norm_factor", 1.0);
      }
    }
    out.is_weights = weights.detach();
  }

  out.response_mask = response_mask.clone();
  if (config.rollout_rs != RolloutCorrectionLevel::kNull) {
    const double upper = config.rollout_rs_threshold;
    const double lower = config.rollout_rs_threshold_lower > 0 ? config.rollout_rs_threshold_lower : 1.0 / upper;
    const auto [weights, for_metrics] = level_ratio(log_ratio, response_mask, config.rollout_rs);
    const auto keep = ((weights >= lower) & (weights <= upper)).to(weights.dtype());
    weight_metrics("rollout_rs", weights, for_metrics, response_mask,
                   config.rollout_rs != RolloutCorrectionLevel::kToken, upper, lower, metrics);
    metrics.emplace_back("rollout_rs_masked_fraction", item(masked_mean(1 - keep, response_mask)));
    metrics.emplace_back("rollout_rs_seq_masked_fraction",
                         config.rollout_rs == RolloutCorrectionLevel::kToken
                             ? item((masked_sum(1 - keep, response_mask, -1) > 0).to(torch::kFloat).mean())
                             : item((1 - keep.select(1, 0)).mean()));
    out.response_mask = response_mask * keep;
  }

  if (config.rollout_token_veto_threshold > 0) {
    const auto log_veto = torch::log(torch::tensor(config.rollout_token_veto_threshold, log_ratio.options()));
    const auto catastrophic = (log_ratio < log_veto) & response_mask.to(torch::kBool);
    const auto has = catastrophic.any(-1, /*keepdim=*/true);
    metrics.emplace_back("rollout_is_veto_fraction", item(has.to(torch::kFloat).mean()));
    metrics.emplace_back("rollout_is_catastrophic_token_fraction",
                         item(masked_mean(catastrophic.to(torch::kFloat), response_mask)));
    out.response_mask = out.response_mask * (~has).to(out.response_mask.dtype());
  } else {
    metrics.emplace_back("rollout_is_veto_fraction", 0.0);
    metrics.emplace_back("rollout_is_catastrophic_token_fraction", 0.0);
  }
  for (auto& [name, value] : metrics) out.metrics.emplace_back("rollout_corr/" + name, value);
  return out;
}

}  // namespace hs::trainer
