// core_algos.cpp — the RL math of the trainer: masked statistics, advantage estimators, PPO
// losses, KL estimators and KL controllers, with verl's names and semantics
// (verl/trainer/ppo/core_algos.py, verl/utils/torch_functional.py, verl/trainer/ppo/ray_trainer.py;
// the formulas are restated in shared/anchors/verl-facts.md).
//
// What it is: pure functions on tensors of shape (bs, T) over response tokens, in the inputs'
// floating dtype, on the inputs' device. Advantage estimators and the KL-in-reward step run
// without autograd; losses keep autograd so the caller can backward() through them.
// What it is not: a trainer. Micro-batch loss scaling, metrics naming and logging live in the
// actor/critic workers.
#include "hybridscope/trainer/rl/core_algos.h"

#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace hs::trainer {
namespace {

// verl's denominators: masked_mean adds 1e-8 to Σm and masked_whiten adds 1e-8 to the variance.
constexpr double kMaskedMeanEps = 1e-8;
constexpr double kWhitenEps = 1e-8;
// Δ = logp − old_logp is clamped before exp() so the ratio cannot overflow (verl).
constexpr double kLogRatioClamp = 20.0;
// low_var_kl (k3): the log-ratio clamp and the value clamp (verl kl_penalty).
constexpr double kLowVarKlLogRatioClamp = 20.0;
constexpr double kLowVarKlValueClamp = 10.0;

/// The mask as a 0/1 (or weight) tensor in the dtype of `like`, for recurrences that only
/// multiply by it (GAE, return-to-go), where the mask's dtype cannot change a value. Statistics
/// (masked_mean, masked_var, agg_loss) take the mask in its own dtype instead: see core_algos.h.
torch::Tensor float_mask(const torch::Tensor& mask, const torch::Tensor& like) {
  return mask.to(like.scalar_type());
}

void check_same_shape(const torch::Tensor& a, const char* a_name, const torch::Tensor& b,
                      const char* b_name) {
  TORCH_CHECK(a.sizes() == b.sizes(), a_name, " has shape ", a.sizes(), " but ", b_name,
              " has shape ", b.sizes(), "; they must match");
}

void check_bt(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 2, name, " must be (bs, response_length), got shape ", t.sizes());
}

/// Group membership of each sample as dense ids 0..num_groups-1, in order of first appearance.
struct Groups {
  torch::Tensor id;  // (bs) int64, on the scores' device
  int64_t num_groups = 0;
};

Groups dense_groups(const std::vector<int64_t>& index, int64_t bs, const torch::Device& device) {
  TORCH_CHECK(static_cast<int64_t>(index.size()) == bs, "index holds ", index.size(),
              " group ids but the batch has ", bs, " samples; pass one uid per sample");
  std::unordered_map<int64_t, int64_t> dense;
  dense.reserve(index.size());
  std::vector<int64_t> ids(index.size());
  for (size_t i = 0; i < index.size(); ++i) {
    const auto it = dense.emplace(index[i], static_cast<int64_t>(dense.size())).first;
    ids[i] = it->second;
  }
  Groups groups;
  groups.id = torch::tensor(ids, torch::dtype(torch::kLong)).to(device);
  groups.num_groups = static_cast<int64_t>(dense.size());
  return groups;
}

/// Per-sample statistics of the sample's group, as verl's id2mean / id2std dictionaries:
/// a group of one has mean 0 and std 1; otherwise the mean and the unbiased std of its scores.
struct GroupStats {
  torch::Tensor mean;   // (bs)
  torch::Tensor std;    // (bs), only when asked for
  torch::Tensor count;  // (bs) group size, in the scores' dtype
};

GroupStats group_stats(const torch::Tensor& scores, const Groups& groups, bool with_std) {
  const auto zeros = torch::zeros({groups.num_groups}, scores.options());
  const auto sums = zeros.index_add(0, groups.id, scores);
  const auto counts = zeros.index_add(0, groups.id, torch::ones_like(scores));
  const auto multi = counts > 1;
  const auto group_mean = torch::where(multi, sums / counts, torch::zeros_like(sums));

  GroupStats stats;
  stats.mean = group_mean.index_select(0, groups.id);
  stats.count = counts.index_select(0, groups.id);
  if (with_std) {
    // Two-pass unbiased variance; the clamp only keeps groups of one away from 0/0, whose value
    // the where() then replaces by 1.
    const auto sq_dev = (scores - stats.mean).square();
    const auto ss = zeros.index_add(0, groups.id, sq_dev);
    const auto group_std =
        torch::where(multi, (ss / (counts - 1).clamp_min(1)).sqrt(), torch::ones_like(ss));
    stats.std = group_std.index_select(0, groups.id);
  }
  return stats;
}

/// std + ε per sample. verl's group of one has std `torch.tensor(1.0)`, a float32 tensor, so its
/// std + ε is float32(1 + ε) = 1.00000095367431640625 for ε = 1e-6, whatever the scores' dtype.
torch::Tensor grpo_denominator(const GroupStats& stats, double epsilon) {
  const double single = static_cast<double>(1.0f + static_cast<float>(epsilon));
  return torch::where(stats.count > 1, stats.std + epsilon, torch::full_like(stats.std, single));
}

/// verl's outcome score: the sum of the token-level rewards of each response, (bs, T) → (bs).
torch::Tensor outcome_scores(const torch::Tensor& token_level_rewards) {
  return token_level_rewards.sum(-1);
}

/// Discounted return-to-go, reset where mask = 0 (verl REINFORCE++): R_t = r_t + γ·R_{t+1}, and
/// the running return is multiplied by m_t after R_t is stored, so nothing flows back across a
/// masked token. (bs, T) → (bs, T).
torch::Tensor masked_return_to_go(const torch::Tensor& rewards, const torch::Tensor& mask, double gamma) {
  const int64_t T = rewards.size(1);
  std::vector<torch::Tensor> returns(static_cast<size_t>(T));
  auto running = torch::zeros({rewards.size(0)}, rewards.options());
  for (int64_t t = T - 1; t >= 0; --t) {
    running = rewards.select(1, t) + gamma * running;
    returns[static_cast<size_t>(t)] = running;
    running = running * mask.select(1, t);
  }
  return torch::stack(returns, 1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Masked statistics (verl torch_functional)
// ---------------------------------------------------------------------------------------------

torch::Tensor masked_sum(const torch::Tensor& values, const torch::Tensor& mask, std::optional<int64_t> axis) {
  check_same_shape(values, "values", mask, "mask");
  // Zero the masked-off values first (a NaN times 0 is still NaN), then multiply by the mask so
  // that a weighted mask weights; the product promotes as torch does (int/bool mask: values' dtype).
  const auto valid = torch::where(mask.to(torch::kBool), values, torch::zeros_like(values));
  const auto product = valid * mask;
  return axis ? product.sum(*axis) : product.sum();
}

torch::Tensor masked_mean(const torch::Tensor& values, const torch::Tensor& mask, std::optional<int64_t> axis) {
  // Σm + 1e-8 in the mask's dtype: an integer or bool mask sums to int64, and int64 + a double
  // scalar is float32 in torch (so the epsilon vanishes for Σm >= 1), as in verl.
  const auto count = axis ? mask.sum(*axis) : mask.sum();
  return masked_sum(values, mask, axis) / (count + kMaskedMeanEps);
}

torch::Tensor masked_var(const torch::Tensor& values, const torch::Tensor& mask, bool unbiased) {
  check_same_shape(values, "values", mask, "mask");
  const auto mean = masked_mean(values, mask);
  auto variance = masked_mean((values - mean).square(), mask);
  if (unbiased) {
    // verl raises for Σm == 0 and Σm == 1; Σm <= 1 also covers fractional masks, whose Bessel
    // factor would be negative or infinite.
    const auto mask_sum = mask.sum();
    const double n = mask_sum.item<double>();
    if (n <= 1.0) {
      throw std::invalid_argument(
          "masked_var: the mask selects " + std::to_string(n) +
          " element(s); an unbiased variance needs more than one (check the response_mask, or "
          "whiten over a larger batch)");
    }
    // N/(N−1) as torch computes it: int64/int64 is a float32 number, a float mask keeps its dtype.
    variance = variance * (mask_sum / (mask_sum - 1));
  }
  return variance;
}

torch::Tensor masked_whiten(const torch::Tensor& values, const torch::Tensor& mask, bool shift_mean) {
  const auto mean = masked_mean(values, mask);
  const auto var = masked_var(values, mask);
  auto whitened = (values - mean) * torch::rsqrt(var + kWhitenEps);
  if (!shift_mean) whitened = whitened + mean;
  return whitened;
}

torch::Tensor entropy_from_logits(const torch::Tensor& logits) {
  const auto probs = torch::softmax(logits, -1);
  return torch::logsumexp(logits, -1) - (probs * logits).sum(-1);
}

torch::Tensor logprobs_from_logits(const torch::Tensor& logits, const torch::Tensor& labels) {
  TORCH_CHECK(logits.dim() == labels.dim() + 1 && logits.sizes().slice(0, labels.dim()) == labels.sizes(),
              "logprobs_from_logits: logits (..., V) must match labels (...); got logits ",
              logits.sizes(), " and labels ", labels.sizes());
  const auto idx = labels.to(torch::kLong).unsqueeze(-1);
  if (logits.scalar_type() == torch::kFloat || logits.scalar_type() == torch::kDouble) {
    // z_label − logsumexp(z) avoids materialising a second (..., V) tensor (verl
    // logprobs_from_logits_v2).
    return logits.gather(-1, idx).squeeze(-1) - torch::logsumexp(logits, -1);
  }
  // In half/bfloat16 the difference of two large rounded numbers loses the answer; log_softmax
  // computes it internally in higher precision (verl does the same for reduced precision).
  return torch::log_softmax(logits, -1).gather(-1, idx).squeeze(-1);
}

// ---------------------------------------------------------------------------------------------
// Advantage estimators (no autograd)
// ---------------------------------------------------------------------------------------------

AdvantageReturn compute_gae_advantage_return(const torch::Tensor& token_level_rewards,
                                             const torch::Tensor& values,
                                             const torch::Tensor& response_mask, double gamma,
                                             double lam) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(values, "values", token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto m = float_mask(response_mask, values);
  const int64_t bs = values.size(0);
  const int64_t T = values.size(1);

  // Reverse scan; where m_t = 0 (observation tokens in multi-turn responses, padding) next_value
  // and lastgaelam pass through unchanged, so the TD chain skips those tokens.
  auto next_value = torch::zeros({bs}, values.options());
  auto lastgaelam = torch::zeros({bs}, values.options());
  std::vector<torch::Tensor> adv(static_cast<size_t>(T));
  for (int64_t t = T - 1; t >= 0; --t) {
    const auto v_t = values.select(1, t);
    const auto m_t = m.select(1, t);
    const auto delta = token_level_rewards.select(1, t) + gamma * next_value - v_t;
    const auto g = delta + gamma * lam * lastgaelam;
    next_value = v_t * m_t + (1 - m_t) * next_value;
    lastgaelam = g * m_t + (1 - m_t) * lastgaelam;
    adv[static_cast<size_t>(t)] = lastgaelam;
  }
  const auto advantages_raw = torch::stack(adv, 1);
  AdvantageReturn out;
  out.returns = advantages_raw + values;
  out.advantages = masked_whiten(advantages_raw, response_mask);
  return out;
}

AdvantageReturn compute_grpo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                               const torch::Tensor& response_mask,
                                               const std::vector<int64_t>& index, double epsilon,
                                               bool norm_adv_by_std_in_grpo) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto scores = outcome_scores(token_level_rewards);
  const auto groups = dense_groups(index, scores.size(0), scores.device());
  const auto stats = group_stats(scores, groups, norm_adv_by_std_in_grpo);
  // Dr. GRPO (norm_adv_by_std_in_grpo = false) drops the division by the group std.
  const auto adv = norm_adv_by_std_in_grpo ? (scores - stats.mean) / grpo_denominator(stats, epsilon)
                                           : scores - stats.mean;
  const auto advantages = adv.unsqueeze(-1) * response_mask;
  return {advantages, advantages};
}

// verl's signature carries epsilon but RLOO never divides by a std; kept for a uniform call site.
AdvantageReturn compute_rloo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                               const torch::Tensor& response_mask,
                                               const std::vector<int64_t>& index, double /*epsilon*/) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto scores = outcome_scores(token_level_rewards);
  const auto groups = dense_groups(index, scores.size(0), scores.device());
  const auto stats = group_stats(scores, groups, /*with_std=*/false);
  // score·n/(n−1) − mean·n/(n−1) = score − mean of the other n−1 samples; a group of one keeps
  // its raw score (verl).
  const auto n = stats.count;
  const auto factor = n / (n - 1).clamp_min(1);
  const auto adv = torch::where(n > 1, scores * factor - stats.mean * factor, scores);
  const auto advantages = adv.unsqueeze(-1) * response_mask;
  return {advantages, advantages};
}

AdvantageReturn compute_grpo_passk_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                     const torch::Tensor& response_mask,
                                                     const std::vector<int64_t>& index, double epsilon,
                                                     bool norm_adv_by_std_in_grpo) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto scores = outcome_scores(token_level_rewards);
  const int64_t bs = scores.size(0);
  TORCH_CHECK(static_cast<int64_t>(index.size()) == bs, "index holds ", index.size(),
              " group ids but the batch has ", bs, " samples; pass one uid per sample");
  // Members of each group in batch order, groups in order of first appearance (verl's dicts).
  std::vector<int64_t> order;
  std::unordered_map<int64_t, std::vector<int64_t>> members;
  for (int64_t i = 0; i < bs; ++i) {
    auto [it, inserted] = members.try_emplace(index[static_cast<size_t>(i)]);
    if (inserted) order.push_back(index[static_cast<size_t>(i)]);
    it->second.push_back(i);
  }
  auto adv = torch::zeros_like(scores);
  for (const int64_t uid : order) {
    const auto& rows = members.at(uid);
    if (rows.size() < 2) {
      throw std::invalid_argument("compute_grpo_passk_outcome_advantage: group " + std::to_string(uid) + " has " +
                                  std::to_string(rows.size()) +
                                  " sample(s); pass@k needs at least 2 per prompt (set rollout.n >= 2)");
    }
    const auto rewards = scores.index_select(0, torch::tensor(rows, torch::kLong).to(scores.device()));  // (k)
    const auto [top, top_idx] = torch::topk(rewards, 2);
    auto a = top[0] - top[1];
    if (norm_adv_by_std_in_grpo) a = a / (rewards.std() + epsilon);
    adv[rows.at(static_cast<size_t>(top_idx[0].item<int64_t>()))] = a;
  }
  const auto advantages = adv.unsqueeze(-1) * response_mask;
  return {advantages, advantages};
}

AdvantageReturn compute_opo_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const std::vector<int64_t>& index) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto scores = outcome_scores(token_level_rewards);
  const auto groups = dense_groups(index, scores.size(0), scores.device());
  // Lengths in the mask's dtype, the product with the scores promoted as torch does.
  const auto lengths = response_mask.sum(-1);
  const auto weighted = lengths * scores;
  const auto zeros = torch::zeros({groups.num_groups}, weighted.options());
  const auto num = zeros.index_add(0, groups.id, weighted);
  const auto den = torch::zeros({groups.num_groups}, lengths.options()).index_add(0, groups.id, lengths);
  const auto counts = torch::zeros({groups.num_groups}, torch::kLong).to(scores.device())
                          .index_add(0, groups.id, torch::ones_like(groups.id));
  // A group of one has baseline 0 (verl); so does a group whose responses are all empty (0/0).
  const auto baseline = torch::where((counts > 1) & (den != 0), num / torch::where(den == 0, torch::ones_like(den), den),
                                     torch::zeros_like(num));
  const auto adv = scores - baseline.index_select(0, groups.id).to(scores.scalar_type());
  const auto advantages = adv.unsqueeze(-1) * response_mask;
  return {advantages, advantages};
}

AdvantageReturn compute_gpg_outcome_advantage(const torch::Tensor& token_level_rewards,
                                              const torch::Tensor& response_mask,
                                              const std::vector<int64_t>& index, double f_norm) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto scores = outcome_scores(token_level_rewards);
  const int64_t bs = scores.size(0);
  // α = bs / max(1, #non-zero scores): int64 / int64, a float32 number in torch.
  const auto nonzero = torch::count_nonzero(scores).clamp_min(1);
  const auto alpha = torch::full({}, bs, torch::kLong).to(scores.device()) / nonzero;
  const auto groups = dense_groups(index, bs, scores.device());
  const auto stats = group_stats(scores, groups, /*with_std=*/false);
  const auto adv = alpha * (scores - stats.mean) / f_norm;
  const auto advantages = adv.unsqueeze(-1) * response_mask;
  return {advantages, advantages};
}

AdvantageReturn compute_reinforce_plus_plus_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                              const torch::Tensor& response_mask,
                                                              double gamma) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto m = float_mask(response_mask, token_level_rewards);
  AdvantageReturn out;
  out.returns = masked_return_to_go(token_level_rewards, m, gamma);
  out.advantages = masked_whiten(out.returns, response_mask) * response_mask;
  return out;
}

// As in verl, the whitening uses masked_whiten's fixed 1e-8; epsilon is unused.
AdvantageReturn compute_reinforce_plus_plus_baseline_outcome_advantage(
    const torch::Tensor& token_level_rewards, const torch::Tensor& response_mask,
    const std::vector<int64_t>& index, double /*epsilon*/) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  const auto scores = outcome_scores(token_level_rewards);
  const auto groups = dense_groups(index, scores.size(0), scores.device());
  const auto stats = group_stats(scores, groups, /*with_std=*/false);
  const auto centred = (scores - stats.mean).unsqueeze(-1) * response_mask;  // (bs, T)
  const auto advantages = masked_whiten(centred, response_mask) * response_mask;
  return {advantages, advantages};
}

AdvantageReturn compute_remax_outcome_advantage(const torch::Tensor& token_level_rewards,
                                                const torch::Tensor& reward_baselines,
                                                const torch::Tensor& response_mask) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_rewards, "token_level_rewards");
  check_same_shape(response_mask, "response_mask", token_level_rewards, "token_level_rewards");
  TORCH_CHECK(reward_baselines.dim() == 1 && reward_baselines.size(0) == token_level_rewards.size(0),
              "reward_baselines must be (bs) = (", token_level_rewards.size(0), "), got shape ",
              reward_baselines.sizes());
  const auto m = float_mask(response_mask, token_level_rewards);
  AdvantageReturn out;
  out.returns = (token_level_rewards * m).flip({-1}).cumsum(-1).flip({-1});
  out.advantages = out.returns - reward_baselines.to(m.scalar_type()).unsqueeze(-1) * m;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Losses (autograd kept)
// ---------------------------------------------------------------------------------------------

torch::Tensor agg_loss(const torch::Tensor& loss_mat, const torch::Tensor& loss_mask, LossAggMode mode,
                       const GlobalBatchInfo& info) {
  check_bt(loss_mat, "loss_mat");
  check_same_shape(loss_mask, "loss_mask", loss_mat, "loss_mat");
  const auto dp = static_cast<double>(info.dp_size);
  // A zero count means nothing is valid and the numerator is exactly 0: divide by 1 instead of
  // giving verl's 0/0 = NaN (the one deviation, see core_algos.h).
  const auto nonzero = [](const torch::Tensor& count) {
    return torch::where(count == 0, torch::ones_like(count), count);
  };
  switch (mode) {
    case LossAggMode::kTokenMean: {
      const auto total = masked_sum(loss_mat, loss_mask);
      if (info.batch_num_tokens) return total / std::max(*info.batch_num_tokens, 1.0) * dp;
      return total / nonzero(loss_mask.sum()) * dp;
    }
    case LossAggMode::kSeqMeanTokenSum:
    case LossAggMode::kSeqMeanTokenMean: {
      const auto row_count = loss_mask.sum(-1);          // (bs), in the mask's dtype
      // (bs) token-sums; verl multiplies without zeroing here, which differs only for a NaN or
      // inf in padding — masked_sum keeps those out.
      auto seq_losses = masked_sum(loss_mat, loss_mask, -1);
      if (mode == LossAggMode::kSeqMeanTokenMean) seq_losses = seq_losses / (row_count + kMaskedMeanEps);
      const auto seq_mask = (row_count > 0).to(torch::kFloat);  // rows without a valid token drop out
      const auto total = masked_sum(seq_losses, seq_mask);
      if (info.global_batch_size) return total / std::max(*info.global_batch_size, 1.0) * dp;
      return total / nonzero(seq_mask.sum()) * dp;
    }
    case LossAggMode::kSeqMeanTokenSumNorm: {
      // Dr. GRPO: a constant normaliser (the padded length) instead of token counts; verl does
      // not multiply this one by dp_size.
      const double divisor = info.loss_scale_factor ? *info.loss_scale_factor : static_cast<double>(loss_mat.size(1));
      return masked_sum(loss_mat, loss_mask, -1).sum() / divisor;
    }
  }
  throw std::invalid_argument("agg_loss: unknown LossAggMode " + std::to_string(static_cast<int>(mode)));
}

PolicyLossOutput compute_policy_loss(const torch::Tensor& old_log_prob, const torch::Tensor& log_prob,
                                     const torch::Tensor& advantages, const torch::Tensor& response_mask,
                                     double clip_ratio_low, double clip_ratio_high, double clip_ratio_c,
                                     LossAggMode loss_agg_mode, const GlobalBatchInfo& info,
                                     const torch::Tensor& rollout_is_weights) {
  check_bt(log_prob, "log_prob");
  check_same_shape(old_log_prob, "old_log_prob", log_prob, "log_prob");
  check_same_shape(advantages, "advantages", log_prob, "log_prob");
  check_same_shape(response_mask, "response_mask", log_prob, "log_prob");
  if (rollout_is_weights.defined()) check_same_shape(rollout_is_weights, "rollout_is_weights", log_prob, "log_prob");
  if (!(clip_ratio_c > 1.0)) {
    throw std::invalid_argument("compute_policy_loss: clip_ratio_c (dual clip) must be > 1, got " +
                                std::to_string(clip_ratio_c) +
                                "; set actor_rollout_ref.actor.clip_ratio_c (default 3.0)");
  }
  const auto neg_approx_kl = (log_prob - old_log_prob).clamp(-kLogRatioClamp, kLogRatioClamp);
  const auto ratio = torch::exp(neg_approx_kl);

  const auto losses1 = -advantages * ratio;
  const auto losses2 = -advantages * ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high);
  const auto clipped1 = torch::maximum(losses1, losses2);
  // Dual clip (Ye et al. 2020): for A < 0 the loss is bounded by −A·c.
  const auto losses3 = -advantages * clip_ratio_c;
  const auto clipped2 = torch::minimum(losses3, clipped1);
  const auto negative = advantages < 0;
  auto pg_losses = torch::where(negative, clipped2, clipped1);
  // Rollout correction: the truncated IS weights scale the already clipped per-token loss.
  if (rollout_is_weights.defined()) pg_losses = pg_losses * rollout_is_weights;

  PolicyLossOutput out;
  out.pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode, info);
  // Metrics: detached, they only get logged. The 0/1 indicators are float32 as verl's .float()
  // makes them; with an integer mask their means stay float32.
  out.pg_clipfrac = masked_mean((losses2 > losses1).to(torch::kFloat), response_mask).detach();
  out.ppo_kl = masked_mean(-neg_approx_kl, response_mask).detach();
  out.pg_clipfrac_lower =
      masked_mean((clipped1 > losses3).to(torch::kFloat) * negative.to(torch::kFloat), response_mask).detach();
  return out;
}

ValueLossOutput compute_value_loss(const torch::Tensor& vpreds, const torch::Tensor& returns,
                                   const torch::Tensor& values, const torch::Tensor& response_mask,
                                   double cliprange_value, LossAggMode loss_agg_mode, const GlobalBatchInfo& info) {
  check_bt(vpreds, "vpreds");
  check_same_shape(returns, "returns", vpreds, "vpreds");
  check_same_shape(values, "values", vpreds, "vpreds");
  check_same_shape(response_mask, "response_mask", vpreds, "vpreds");
  // verl clip_by_value: max(min(v, V_old + c), V_old − c).
  const auto vpred_clipped =
      torch::maximum(torch::minimum(vpreds, values + cliprange_value), values - cliprange_value);
  const auto losses1 = (vpreds - returns).square();
  const auto losses2 = (vpred_clipped - returns).square();
  ValueLossOutput out;
  out.vf_loss = 0.5 * agg_loss(torch::maximum(losses1, losses2), response_mask, loss_agg_mode, info);
  out.vf_clipfrac = masked_mean((losses2 > losses1).to(torch::kFloat), response_mask).detach();
  return out;
}

torch::Tensor compute_entropy_loss(const torch::Tensor& logits, const torch::Tensor& response_mask,
                                   LossAggMode loss_agg_mode, const GlobalBatchInfo& info) {
  TORCH_CHECK(logits.dim() == 3, "compute_entropy_loss: logits must be (bs, T, V), got shape ",
              logits.sizes());
  return agg_loss(entropy_from_logits(logits), response_mask, loss_agg_mode, info);
}

torch::Tensor kl_penalty(const torch::Tensor& logprob, const torch::Tensor& ref_logprob, KlPenalty kind) {
  check_same_shape(logprob, "logprob", ref_logprob, "ref_logprob");
  switch (kind) {
    case KlPenalty::kKl:
      return logprob - ref_logprob;
    case KlPenalty::kAbs:
      return (logprob - ref_logprob).abs();
    case KlPenalty::kMse:
      return 0.5 * (logprob - ref_logprob).square();
    case KlPenalty::kLowVarKl: {
      // k3 (Schulman, "Approximating KL divergence"): r − log r − 1 with r = π_ref/π, which is
      // non-negative and unbiased; both clamps keep it finite for far-apart policies.
      const auto x = (ref_logprob - logprob).clamp(-kLowVarKlLogRatioClamp, kLowVarKlLogRatioClamp);
      return (torch::exp(x) - x - 1).clamp(-kLowVarKlValueClamp, kLowVarKlValueClamp);
    }
  }
  throw std::invalid_argument("kl_penalty: unknown KlPenalty " + std::to_string(static_cast<int>(kind)));
}

// ---------------------------------------------------------------------------------------------
// KL controllers
// ---------------------------------------------------------------------------------------------

AdaptiveKlController::AdaptiveKlController(double init_kl_coef, double target_kl, int64_t horizon)
    : value_(init_kl_coef), target_(target_kl), horizon_(horizon) {
  if (!(target_kl > 0)) {
    throw std::invalid_argument("AdaptiveKlController: target_kl must be > 0, got " +
                                std::to_string(target_kl));
  }
  if (horizon <= 0) {
    throw std::invalid_argument("AdaptiveKlController: horizon must be > 0, got " +
                                std::to_string(horizon));
  }
}

void AdaptiveKlController::update(double current_kl, int64_t n_steps) {
  const double proportional_error = std::clamp(current_kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + proportional_error * static_cast<double>(n_steps) / static_cast<double>(horizon_);
}

std::unique_ptr<KlController> make_kl_controller(const KlCtrlConfig& config) {
  switch (config.type) {
    case KlCtrlType::kFixed:
      return std::make_unique<FixedKlController>(config.kl_coef);
    case KlCtrlType::kAdaptive:
      if (config.horizon <= 0) {
        throw ConfigError("algorithm.kl_ctrl.horizon must be > 0 for an adaptive KL controller, got " +
                          std::to_string(config.horizon));
      }
      if (!(config.target_kl > 0)) {
        throw ConfigError("algorithm.kl_ctrl.target_kl must be > 0 for an adaptive KL controller, got " +
                          std::to_string(config.target_kl));
      }
      return std::make_unique<AdaptiveKlController>(config.kl_coef, config.target_kl, config.horizon);
  }
  throw ConfigError("algorithm.kl_ctrl.type: unknown controller type " +
                    std::to_string(static_cast<int>(config.type)) + "; use fixed or adaptive");
}

KlInRewardOutput apply_kl_penalty(const torch::Tensor& token_level_scores, const torch::Tensor& old_log_prob,
                                  const torch::Tensor& ref_log_prob, const torch::Tensor& response_mask,
                                  KlController& controller, KlPenalty kind) {
  torch::NoGradGuard no_grad;
  check_bt(token_level_scores, "token_level_scores");
  check_same_shape(old_log_prob, "old_log_prob", token_level_scores, "token_level_scores");
  check_same_shape(response_mask, "response_mask", token_level_scores, "token_level_scores");
  const auto kld = kl_penalty(old_log_prob, ref_log_prob, kind) * response_mask;
  const double beta = controller.value();

  KlInRewardOutput out;
  out.token_level_rewards = token_level_scores - beta * kld;
  // verl: the per-sequence masked mean (an all-masked row counts as 0), averaged over the batch.
  out.current_kl = masked_mean(kld, response_mask, /*axis=*/-1).mean().item<double>();
  controller.update(out.current_kl, token_level_scores.size(0));
  return out;
}

}  // namespace hs::trainer
