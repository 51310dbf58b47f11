#include "hybridscope/trainer/rl/metrics.h"

#include "hybridscope/probes/model_flops.h"
#include "hybridscope/trainer/dist/process_group.h"
#include "model/model_layers.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

namespace hs::trainer {

namespace {
void add_stats(Metrics& out, const std::string& prefix, const torch::Tensor& values) {
  if (values.numel() == 0) {
    out.emplace_back(prefix + "/mean", 0.0);
    out.emplace_back(prefix + "/max", 0.0);
    out.emplace_back(prefix + "/min", 0.0);
    return;
  }
  const auto v = values.to(torch::kFloat64);
  out.emplace_back(prefix + "/mean", v.mean().item<double>());
  out.emplace_back(prefix + "/max", v.max().item<double>());
  out.emplace_back(prefix + "/min", v.min().item<double>());
}
}  // namespace

Metrics compute_data_metrics(const RolloutBatch& batch, bool use_critic, int max_prompt_length,
                             int max_response_length) {
  torch::NoGradGuard no_grad;
  Metrics out;
  const auto mask = batch.response_mask.to(torch::kBool);
  add_stats(out, "critic/score", batch.token_level_scores.sum(-1));
  add_stats(out, "critic/rewards", batch.token_level_rewards.sum(-1));
  add_stats(out, "critic/advantages", torch::masked_select(batch.advantages, mask));
  const auto returns = torch::masked_select(batch.returns, mask);
  add_stats(out, "critic/returns", returns);
  if (use_critic) {
    const auto values = torch::masked_select(batch.values, mask).to(torch::kFloat64);
    add_stats(out, "critic/values", values);
    const auto r = returns.to(torch::kFloat64);
    const double var_returns = r.numel() > 1 ? r.var().item<double>() : 0.0;
    const double var_diff = r.numel() > 1 ? (r - values).var().item<double>() : 0.0;
    out.emplace_back("critic/vf_explained_var", 1.0 - var_diff / (var_returns + 1e-5));
  }
  // Lengths from the attention mask, as verl's _compute_response_info: rollout rejection narrows
  // the response mask of the update, not what was generated.
  const auto response_length = batch.attention_mask.slice(1, batch.prompt_length()).sum(-1).to(torch::kFloat64);
  const auto prompt_length =
      batch.attention_mask.slice(1, 0, batch.prompt_length()).sum(-1).to(torch::kFloat64);
  add_stats(out, "response_length", response_length);
  out.emplace_back("response_length/clip_ratio",
                   response_length.ge(max_response_length).to(torch::kFloat64).mean().item<double>());
  add_stats(out, "prompt_length", prompt_length);
  out.emplace_back("prompt_length/clip_ratio",
                   prompt_length.ge(max_prompt_length).to(torch::kFloat64).mean().item<double>());
  return out;
}

Metrics compute_timing_metrics(const RolloutBatch& batch,
                               const std::vector<std::pair<const char*, double>>& phase_seconds) {
  const double response_tokens = batch.attention_mask.slice(1, batch.prompt_length()).sum().item<double>();
  const double overall_tokens = batch.attention_mask.sum().item<double>();
  Metrics out;
  for (const auto& [name, seconds] : phase_seconds) {
    out.emplace_back(std::string("timing_s/") + name, seconds);
    // verl's sections: gen per response token; ref, values, adv, update_critic, update_actor per
    // prompt + response token; no per-token figure for the others.
    const std::string phase = name;
    static const char* const kOverall[] = {"ref", "values", "adv", "update_critic", "update_actor"};
    const bool overall = std::any_of(std::begin(kOverall), std::end(kOverall), [&](const char* p) { return phase == p; });
    if (phase != "gen" && !overall) continue;
    const double tokens = phase == "gen" ? response_tokens : overall_tokens;
    if (tokens > 0) out.emplace_back("timing_per_token_ms/" + phase, seconds * 1000.0 / tokens);
  }
  return out;
}

double estimate_flops(const ModelShape& s, const std::vector<std::int64_t>& sequence_lengths) {
  // One formula for the trainer's MFU and the simulator (hs::probes::training_flops, verl's).
  const probes::DecoderShape shape{static_cast<double>(s.vocab_size),          static_cast<double>(s.hidden_size),
                                   static_cast<double>(s.intermediate_size),   static_cast<double>(s.num_hidden_layers),
                                   static_cast<double>(s.num_attention_heads), static_cast<double>(s.num_key_value_heads),
                                   static_cast<double>(s.head_dim())};
  return probes::training_flops(shape, sequence_lengths);
}

double cpu_memory_used_gb() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0.0;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0 * 1024.0);
}

std::vector<std::int64_t> sequence_lengths(const RolloutBatch& batch) {
  const auto lengths = batch.attention_mask.sum(-1).to(torch::kInt64).contiguous();
  return std::vector<std::int64_t>(lengths.data_ptr<std::int64_t>(), lengths.data_ptr<std::int64_t>() + lengths.numel());
}

Metrics seqlen_balance_metrics(const std::vector<std::int64_t>& seqlens,
                               const std::vector<std::vector<std::size_t>>& partitions) {
  const std::size_t k = partitions.size();
  if (k == 0 || seqlens.size() % k != 0)
    throw std::invalid_argument(fmt::format("seqlen_balance_metrics: {} sequences cannot be split into {} equal dp shares",
                                            seqlens.size(), k));
  auto extremes = [](const std::vector<std::int64_t>& totals) { return std::minmax_element(totals.begin(), totals.end()); };
  // The contiguous shares (verl: seqlen_list[offset : offset + batch_size], batch_size = len / k).
  const std::size_t share = seqlens.size() / k;
  std::vector<std::int64_t> contiguous(k, 0), balanced(k, 0);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < seqlens.size(); ++i) {
    contiguous[share == 0 ? 0 : i / share] += seqlens[i];
    total += seqlens[i];
  }
  for (std::size_t r = 0; r < k; ++r)
    for (const std::size_t i : partitions[r]) balanced[r] += seqlens.at(i);
  const auto [lo, hi] = extremes(contiguous);
  const auto [balanced_lo, balanced_hi] = extremes(balanced);
  return {{"global_seqlen/min", static_cast<double>(*lo)},
          {"global_seqlen/max", static_cast<double>(*hi)},
          {"global_seqlen/minmax_diff", static_cast<double>(*hi - *lo)},
          {"global_seqlen/balanced_min", static_cast<double>(*balanced_lo)},
          {"global_seqlen/balanced_max", static_cast<double>(*balanced_hi)},
          {"global_seqlen/mean", static_cast<double>(total) / static_cast<double>(k)}};
}

Metrics actor_param_metrics(const LayoutSet& training) {
  std::int64_t per_rank = 0;
  for (int r = 0; r < training.world(); ++r) per_rank = std::max(per_rank, training.rank_bytes(r));
  return {{"perf/actor_param_bytes", static_cast<double>(training.model_bytes())},
          {"perf/actor_param_bytes_per_rank", static_cast<double>(per_rank)}};
}

Combine combine_of(const std::string& name) {
  if (name == "perf/total_num_tokens" || name == "perf/throughput" || name.rfind("perf/mfu/", 0) == 0)
    return Combine::kSum;
  if (name.rfind("timing_s/", 0) == 0 || name == "perf/time_per_step" || name == "perf/cpu_memory_used_gb")
    return Combine::kMax;
  if (name.find("max") != std::string::npos) return Combine::kMax;
  if (name.find("min") != std::string::npos) return Combine::kMin;
  return Combine::kMean;
}

Metrics reduce_metrics(const Metrics& metrics, Communicator& world, int model_parallel) {
  if (world.size() == 1) return metrics;
  const auto n = static_cast<std::int64_t>(metrics.size());
  auto count = torch::tensor({n, -n}, torch::kInt64);
  world.all_reduce(count, ReduceOp::kMax);
  if (count[0].item<std::int64_t>() != n || -count[1].item<std::int64_t>() != n)
    throw DistError(fmt::format("ranks report different metric sets ({} here, {} to {} elsewhere)", n,
                                -count[1].item<std::int64_t>(), count[0].item<std::int64_t>()));
  auto values = torch::empty({n}, torch::kFloat64);
  for (std::int64_t i = 0; i < n; ++i) values[i] = metrics[static_cast<std::size_t>(i)].second;
  auto sum = values.clone(), max = values.clone(), min = values.clone();
  world.all_reduce(sum, ReduceOp::kSum);
  world.all_reduce(max, ReduceOp::kMax);
  world.all_reduce(min, ReduceOp::kMin);
  Metrics out;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& name = metrics[static_cast<std::size_t>(i)].first;
    double v = 0;
    switch (combine_of(name)) {
      case Combine::kSum: v = sum[i].item<double>() / model_parallel; break;
      case Combine::kMax: v = max[i].item<double>(); break;
      case Combine::kMin: v = min[i].item<double>(); break;
      case Combine::kMean: v = sum[i].item<double>() / world.size(); break;
    }
    out.emplace_back(name, v);
  }
  return out;
}

}  // namespace hs::trainer
