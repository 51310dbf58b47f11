#include "hybridscope/trainer/data/batch.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

namespace hs::trainer {

namespace {
torch::Tensor take_rows(const torch::Tensor& t, const torch::Tensor& index) {
  return t.defined() ? t.index_select(0, index) : t;
}
template <typename T>
std::vector<T> take_rows(const std::vector<T>& v, const std::vector<std::int64_t>& index) {
  if (v.empty()) return v;
  std::vector<T> out;
  out.reserve(index.size());
  for (auto i : index) out.push_back(v.at(static_cast<std::size_t>(i)));
  return out;
}
}  // namespace

RolloutBatch RolloutBatch::select(const std::vector<std::int64_t>& index) const {
  const auto idx = torch::tensor(index, torch::kInt64);
  RolloutBatch out;
  out.prompts = take_rows(prompts, idx);
  out.responses = take_rows(responses, idx);
  out.input_ids = take_rows(input_ids, idx);
  out.attention_mask = take_rows(attention_mask, idx);
  out.position_ids = take_rows(position_ids, idx);
  out.response_mask = take_rows(response_mask, idx);
  out.uid = take_rows(uid, index);
  out.ground_truth = take_rows(ground_truth, index);
  out.data_source = take_rows(data_source, index);
  out.rollout_log_probs = take_rows(rollout_log_probs, idx);
  out.rollout_is_weights = take_rows(rollout_is_weights, idx);
  out.old_log_probs = take_rows(old_log_probs, idx);
  out.ref_log_probs = take_rows(ref_log_probs, idx);
  out.values = take_rows(values, idx);
  out.token_level_scores = take_rows(token_level_scores, idx);
  out.token_level_rewards = take_rows(token_level_rewards, idx);
  out.advantages = take_rows(advantages, idx);
  out.returns = take_rows(returns, idx);
  out.reward_baselines = take_rows(reward_baselines, idx);
  return out;
}

RolloutBatch RolloutBatch::to(const torch::Device& device) const {
  auto move = [&](const torch::Tensor& t) { return t.defined() ? t.to(device) : t; };
  RolloutBatch out = *this;
  for (torch::Tensor* t : {&out.prompts, &out.responses, &out.input_ids, &out.attention_mask, &out.position_ids,
                           &out.response_mask, &out.rollout_log_probs, &out.rollout_is_weights,
                           &out.old_log_probs, &out.ref_log_probs, &out.values,
                           &out.token_level_scores, &out.token_level_rewards, &out.advantages, &out.returns,
                           &out.reward_baselines})
    *t = move(*t);
  return out;
}

RolloutBatch make_rollout_batch(const std::vector<std::vector<std::int32_t>>& prompts,
                                const std::vector<std::vector<std::int32_t>>& responses, int n,
                                int pad_token_id, int eos_token_id) {
  if (n < 1 || responses.size() != prompts.size() * static_cast<std::size_t>(n))
    throw std::invalid_argument("make_rollout_batch: expected prompts x n responses");
  const auto batch = static_cast<std::int64_t>(responses.size());
  std::int64_t max_prompt = 1, max_response = 1;
  for (const auto& p : prompts) max_prompt = std::max<std::int64_t>(max_prompt, static_cast<std::int64_t>(p.size()));
  for (const auto& r : responses) max_response = std::max<std::int64_t>(max_response, static_cast<std::int64_t>(r.size()));

  RolloutBatch out;
  out.prompts = torch::full({batch, max_prompt}, pad_token_id, torch::kInt64);
  out.responses = torch::full({batch, max_response}, pad_token_id, torch::kInt64);
  auto prompt_mask = torch::zeros({batch, max_prompt}, torch::kInt64);
  auto response_mask = torch::zeros({batch, max_response}, torch::kInt64);
  auto prompts_a = out.prompts.accessor<std::int64_t, 2>();
  auto responses_a = out.responses.accessor<std::int64_t, 2>();
  auto pmask_a = prompt_mask.accessor<std::int64_t, 2>();
  auto rmask_a = response_mask.accessor<std::int64_t, 2>();
  out.uid.resize(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto& p = prompts[static_cast<std::size_t>(b / n)];
    const auto offset = max_prompt - static_cast<std::int64_t>(p.size());  // left padding
    for (std::size_t t = 0; t < p.size(); ++t) {
      prompts_a[b][offset + static_cast<std::int64_t>(t)] = p[t];
      pmask_a[b][offset + static_cast<std::int64_t>(t)] = 1;
    }
    const auto& r = responses[static_cast<std::size_t>(b)];
    for (std::size_t t = 0; t < r.size(); ++t) {
      responses_a[b][static_cast<std::int64_t>(t)] = r[t];
      rmask_a[b][static_cast<std::int64_t>(t)] = 1;
      if (r[t] == eos_token_id) break;  // the mask covers the response up to and including EOS
    }
    out.uid[static_cast<std::size_t>(b)] = b / n;
  }
  out.input_ids = torch::cat({out.prompts, out.responses}, 1);
  out.attention_mask = torch::cat({prompt_mask, response_mask}, 1);
  out.position_ids = (out.attention_mask.cumsum(1) - 1).clamp_min(0);
  out.response_mask = response_mask.to(torch::kFloat32);
  return out;
}

}  // namespace hs::trainer
