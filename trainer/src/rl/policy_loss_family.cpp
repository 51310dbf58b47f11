// policy_loss_family.cpp — the policy losses beyond vanilla PPO that verl registers under
// actor.policy_loss.loss_mode (verl/trainer/ppo/core_algos.py, 2026-01): gspo, gpg, clip_cov,
// kl_cov, and the dispatcher that picks one by the config key.
//
// What it is: pure functions on (bs, response_length) tensors, autograd kept, in the inputs'
// dtype; the mask keeps its dtype (core_algos.h). What it is not: the vanilla loss (core_algos.cpp)
// or the micro-batch loop (ppo_workers.cpp).
#include "hybridscope/trainer/rl/core_algos.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <stdexcept>
#include <string>

namespace hs::trainer {
namespace {

// GSPO clamps the log of the per-token sequence ratio from above only (verl).
constexpr double kGspoLogRatioMax = 10.0;

void check_policy_inputs(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                         const torch::Tensor& advantages, const torch::Tensor& response_mask,
                         const torch::Tensor& rollout_is_weights) {
  TORCH_CHECK(log_prob.dim() == 2, "log_prob must be (bs, response_length), got shape ", log_prob.sizes());
  for (const auto& [t, name] : {std::pair{&old_log_prob, "old_log_prob"}, std::pair{&advantages, "advantages"},
                                std::pair{&response_mask, "response_mask"}}) {
    if (t->defined())
      TORCH_CHECK(t->sizes() == log_prob.sizes(), name, " has shape ", t->sizes(), " but log_prob has shape ",
                  log_prob.sizes(), "; they must match");
  }
  if (rollout_is_weights.defined())
    TORCH_CHECK(rollout_is_weights.sizes() == log_prob.sizes(), "rollout_is_weights has shape ",
                rollout_is_weights.sizes(), " but log_prob has shape ", log_prob.sizes(), "; they must match");
}

torch::Tensor weighted(const torch::Tensor& pg_losses, const torch::Tensor& rollout_is_weights) {
  return rollout_is_weights.defined() ? pg_losses * rollout_is_weights : pg_losses;
}

void check_ratio(double ratio, const char* key) {
  if (!(ratio > 0.0)) {
    throw std::invalid_argument(std::string("actor_rollout_ref.actor.policy_loss.") + key + " = " +
                                std::to_string(ratio) + ": must be > 0 (verl's default is 0.0002)");
  }
}

}  // namespace

PolicyLossOutput compute_policy_loss_gspo(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                          const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                          double clip_ratio_low, double clip_ratio_high, const GlobalBatchInfo& info,
                                          const torch::Tensor& rollout_is_weights) {
  check_policy_inputs(old_log_prob, log_prob, advantages, response_mask, rollout_is_weights);
  const auto neg_approx_kl = log_prob - old_log_prob;  // (bs, T), not clamped (verl)
  // log s_i = Σ_t Δ·m / max(1, Σ_t m): the mean log-ratio of the sequence (bs).
  const auto seq_lengths = response_mask.sum(-1).clamp_min(1);
  const auto neg_approx_kl_seq = (neg_approx_kl * response_mask).sum(-1) / seq_lengths;
  // s_it = sg[s_i]·π_θ(y_t)/sg[π_θ(y_t)]: the value of s_i, the gradient of the token's log-prob.
  const auto log_seq_ratio =
      (log_prob - log_prob.detach() + neg_approx_kl_seq.detach().unsqueeze(-1)).clamp_max(kGspoLogRatioMax);
  const auto seq_ratio = torch::exp(log_seq_ratio);
  const auto losses1 = -advantages * seq_ratio;
  const auto losses2 = -advantages * seq_ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high);
  const auto pg_losses = weighted(torch::maximum(losses1, losses2), rollout_is_weights);

  PolicyLossOutput out;
  // verl aggregates GSPO per sequence whatever loss_agg_mode is configured.
  out.pg_loss = agg_loss(pg_losses, response_mask, LossAggMode::kSeqMeanTokenMean, info);
  out.pg_clipfrac = masked_mean((losses2 > losses1).to(torch::kFloat), response_mask).detach();
  out.pg_clipfrac_lower = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(log_prob.device()));
  out.ppo_kl = masked_mean(-neg_approx_kl, response_mask).detach();
  return out;
}

PolicyLossOutput compute_policy_loss_gpg(const torch::Tensor& log_prob, const torch::Tensor& advantages,
                                         const torch::Tensor& response_mask, LossAggMode loss_agg_mode,
                                         const GlobalBatchInfo& info, const torch::Tensor& rollout_is_weights) {
  check_policy_inputs(torch::Tensor(), log_prob, advantages, response_mask, rollout_is_weights);
  PolicyLossOutput out;
  out.pg_loss = agg_loss(weighted(-log_prob * advantages, rollout_is_weights), response_mask, loss_agg_mode, info);
  return out;
}

PolicyLossOutput compute_policy_loss_clip_cov(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                              const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                              double clip_ratio_low, double clip_ratio_high, double clip_cov_ratio,
                                              double clip_cov_lb, double clip_cov_ub, LossAggMode loss_agg_mode,
                                              const GlobalBatchInfo& info, const torch::Tensor& rollout_is_weights,
                                              std::optional<at::Generator> generator) {
  check_policy_inputs(old_log_prob, log_prob, advantages, response_mask, rollout_is_weights);
  check_ratio(clip_cov_ratio, "clip_cov_ratio");
  const auto neg_approx_kl = log_prob - old_log_prob;
  const auto ratio = torch::exp(neg_approx_kl);
  const auto ppo_kl = masked_mean(-neg_approx_kl, response_mask);
  const auto losses1 = -advantages * ratio;
  const auto losses2 = -advantages * ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high);
  const auto valid = response_mask > 0;
  const auto clip_by_origin = (losses2 > losses1) & valid;

  // Centred covariance of advantage and log-prob per token; invalid and already clipped tokens
  // are taken out of the candidates.
  auto cov_all = ((advantages - masked_mean(advantages, response_mask)) *
                  (log_prob - masked_mean(log_prob.detach(), response_mask)))
                     .detach();
  const double neg_inf = -std::numeric_limits<double>::infinity();
  cov_all = cov_all.masked_fill(~valid, neg_inf).masked_fill(clip_by_origin, neg_inf);

  const auto clip_num =
      std::max<int64_t>(static_cast<int64_t>(clip_cov_ratio * response_mask.sum().item<double>()), 1);
  auto candidates = torch::nonzero((cov_all < clip_cov_ub) & (cov_all > clip_cov_lb) & valid);  // (n, 2)
  const int64_t n = candidates.size(0);
  auto corr = torch::ones_like(advantages);
  if (n > 0) {
    // verl draws the cut tokens with torch.randperm on the CPU generator.
    const auto perm = generator ? torch::randperm(n, *generator, torch::kLong) : torch::randperm(n, torch::kLong);
    const auto chosen = candidates.index_select(0, perm.slice(0, 0, std::min(clip_num, n)).to(candidates.device()));
    corr.index_put_({chosen.select(1, 0), chosen.select(1, 1)}, 0);
  }

  PolicyLossOutput out;
  out.pg_clipfrac = masked_mean((corr == 0).to(torch::kFloat), response_mask).detach();
  const auto pg_losses = weighted(torch::maximum(losses1, losses2) * corr, rollout_is_weights);
  out.pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, info);
  out.ppo_kl = ppo_kl.detach();
  return out;
}

PolicyLossOutput compute_policy_loss_kl_cov(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                            const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                            double kl_cov_ratio, double ppo_kl_coef, LossAggMode loss_agg_mode,
                                            const GlobalBatchInfo& info, const torch::Tensor& rollout_is_weights) {
  check_policy_inputs(old_log_prob, log_prob, advantages, response_mask, rollout_is_weights);
  check_ratio(kl_cov_ratio, "kl_cov_ratio");
  const auto neg_approx_kl = log_prob - old_log_prob;
  const auto abs_kl = neg_approx_kl.abs();
  const auto ratio = torch::exp(neg_approx_kl);
  const auto losses1 = -advantages * ratio;
  const auto losses_kl = losses1 + ppo_kl_coef * abs_kl;

  // Valid tokens in row-major order; their covariance with plain (unmasked-count) means.
  const auto flat_valid_idx = torch::nonzero((response_mask > 0).reshape({-1})).reshape({-1});
  const int64_t n_valid = flat_valid_idx.size(0);
  auto selected = torch::zeros({losses1.numel()}, torch::TensorOptions().dtype(torch::kBool).device(log_prob.device()));
  if (n_valid > 0) {
    const auto adv_valid = advantages.detach().reshape({-1}).index_select(0, flat_valid_idx).cpu();
    const auto logp_valid = log_prob.detach().reshape({-1}).index_select(0, flat_valid_idx).cpu();
    const auto cov = (adv_valid - adv_valid.mean()) * (logp_valid - logp_valid.mean());
    const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n_valid) * kl_cov_ratio));
    const auto top = std::get<1>(torch::topk(cov, std::min(k, n_valid), /*dim=*/-1, /*largest=*/true));
    selected.index_fill_(0, flat_valid_idx.index_select(0, top.to(flat_valid_idx.device())), true);
  }
  const auto pg_losses = torch::where(selected.view_as(losses1), losses_kl, losses1);

  PolicyLossOutput out;
  out.pg_loss = agg_loss(weighted(pg_losses, rollout_is_weights), response_mask, loss_agg_mode, info);
  out.ppo_kl = masked_mean(abs_kl, response_mask).detach();
  return out;
}

PolicyLossOutput compute_policy_loss_for_mode(const ActorConfig& actor, const torch::Tensor& old_log_prob,
                                              const torch::Tensor& log_prob, const torch::Tensor& advantages,
                                              const torch::Tensor& response_mask, const GlobalBatchInfo& info,
                                              const torch::Tensor& rollout_is_weights) {
  const auto& pl = actor.policy_loss;
  switch (pl.loss_mode) {
    case PolicyLossMode::kVanilla:
      return compute_policy_loss(old_log_prob, log_prob, advantages, response_mask, actor.effective_clip_low(),
                                 actor.effective_clip_high(), actor.clip_ratio_c, actor.loss_agg_mode, info,
                                 rollout_is_weights);
    case PolicyLossMode::kGspo:
      return compute_policy_loss_gspo(old_log_prob, log_prob, advantages, response_mask, actor.effective_clip_low(),
                                      actor.effective_clip_high(), info, rollout_is_weights);
    case PolicyLossMode::kGpg:
      return compute_policy_loss_gpg(log_prob, advantages, response_mask, actor.loss_agg_mode, info,
                                     rollout_is_weights);
    case PolicyLossMode::kClipCov:
      return compute_policy_loss_clip_cov(old_log_prob, log_prob, advantages, response_mask,
                                          actor.effective_clip_low(), actor.effective_clip_high(), pl.clip_cov_ratio,
                                          pl.clip_cov_lb, pl.clip_cov_ub, actor.loss_agg_mode, info,
                                          rollout_is_weights);
    case PolicyLossMode::kKlCov:
      return compute_policy_loss_kl_cov(old_log_prob, log_prob, advantages, response_mask, pl.kl_cov_ratio,
                                        pl.ppo_kl_coef, actor.loss_agg_mode, info, rollout_is_weights);
  }
  throw std::invalid_argument("actor_rollout_ref.actor.policy_loss.loss_mode: unknown mode " +
                              std::to_string(static_cast<int>(pl.loss_mode)) +
                              "; use vanilla, gspo, gpg, clip_cov or kl_cov");
}

}  // namespace hs::trainer
