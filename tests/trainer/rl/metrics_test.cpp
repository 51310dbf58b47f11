// metrics_test.cpp — verl's per-step metric definitions: timing per token by section, the FLOPs
// estimate, the data metrics over valid tokens only.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/rl/metrics.h"

using namespace hs::trainer;

namespace {
std::map<std::string, double> as_map(const Metrics& m) { return {m.begin(), m.end()}; }

// 2 prompts x 1: prompt lengths 3 and 2, response lengths 2 (with EOS) and 3 (no EOS).
RolloutBatch small_batch() {
  RolloutBatch b = make_rollout_batch({{1, 5, 6}, {1, 7}}, {{3, 2}, {4, 4, 4}}, 1, 0, 2);
  b.token_level_scores = torch::zeros({2, 3});
  b.token_level_scores[0][1] = 1.0;
  b.token_level_rewards = b.token_level_scores.clone();
  b.advantages = torch::tensor({{0.5, 0.5, 99.0}, {-1.0, -1.0, -1.0}});  // 99 sits on padding
  b.returns = b.advantages.clone();
  return b;
}
}  // namespace

TEST(Metrics, TimingPerTokenFollowsVerlSections) {
  const RolloutBatch b = small_batch();  // 5 response tokens, 10 prompt + response tokens
  const auto m = as_map(compute_timing_metrics(b, {{"gen", 0.5}, {"update_actor", 2.0}, {"old_log_prob", 1.0},
                                                   {"step", 4.0}, {"switch/train_to_rollout", 0.1}}));
  EXPECT_DOUBLE_EQ(m.at("timing_s/gen"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("timing_per_token_ms/gen"), 0.5 * 1000 / 5);
  EXPECT_DOUBLE_EQ(m.at("timing_per_token_ms/update_actor"), 2.0 * 1000 / 10);
  EXPECT_FALSE(m.count("timing_per_token_ms/old_log_prob"));
  EXPECT_FALSE(m.count("timing_per_token_ms/step"));
  EXPECT_FALSE(m.count("timing_per_token_ms/switch/train_to_rollout"));
  EXPECT_DOUBLE_EQ(m.at("timing_s/switch/train_to_rollout"), 0.1);
}

TEST(Metrics, FlopsEstimateMatchesTheClosedForm) {
  ModelShape s;
  s.vocab_size = 98;
  s.hidden_size = 128;
  s.intermediate_size = 384;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 4;
  s.num_key_value_heads = 2;
  // N_dense = 2 * (3*128*384 + 128*(128 + 64 + 64 + 128)) + 2*98*128 = 418304
  const double dense = 418304.0;
  const double expected = 6 * dense * (10 + 20) + 6 * (100.0 + 400.0) * 32 * 4 * 2;
  EXPECT_DOUBLE_EQ(estimate_flops(s, {10, 20}), expected);
}

TEST(Metrics, DataMetricsCountValidTokensOnly) {
  const RolloutBatch b = small_batch();
  const auto m = as_map(compute_data_metrics(b, false, 3, 3));
  EXPECT_DOUBLE_EQ(m.at("critic/score/mean"), 0.5);
  EXPECT_DOUBLE_EQ(m.at("critic/advantages/max"), 0.5);  // the 99 on padding is not counted
  EXPECT_DOUBLE_EQ(m.at("critic/advantages/min"), -1.0);
  EXPECT_DOUBLE_EQ(m.at("response_length/mean"), 2.5);
  EXPECT_DOUBLE_EQ(m.at("response_length/clip_ratio"), 0.5);  // one response hit max_response_length 3
  EXPECT_DOUBLE_EQ(m.at("prompt_length/max"), 3.0);
  EXPECT_DOUBLE_EQ(m.at("prompt_length/clip_ratio"), 0.5);
  EXPECT_FALSE(m.count("critic/values/mean"));
  EXPECT_EQ(sequence_lengths(b), (std::vector<std::int64_t>{5, 5}));
}
