// metrics_test.cpp — verl's per-step metric definitions: timing per token by section, the FLOPs
// estimate, the data metrics over valid tokens only, global_seqlen/* over the dp shares, and the
// actor's parameter bytes (whole and per rank) in each training layout.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/hybrid/reshard_executor.h"
#include "hybridscope/trainer/model/device.h"
#include "hybridscope/trainer/model/model.h"
#include "hybridscope/trainer/rl/metrics.h"
#include "hybridscope/trainer/rl/ppo_workers.h"

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

// The CPU peak behind mfu is measured over both float32 product libraries (cpu_matmul.cpp): a
// finite rate a 2-core machine reaches, not zero when one library is missing or a product throws.
TEST(Metrics, MeasuredCpuPeakIsAFiniteGemmRate) {
  const double peak = measure_gemm_flops();
  EXPECT_TRUE(std::isfinite(peak));
  EXPECT_GT(peak, 1e9);   // a single core of anything this code builds for does a GFLOP/s
  EXPECT_LT(peak, 1e14);  // no CPU socket does 100 TFLOP/s of float32
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

// A step of 4 prompts x n = 2 on dp = 2, lengths chosen by hand. Prompt lengths 3, 5, 2, 4;
// response lengths (through EOS) {4, 6}, {8, 9}, {1, 2}, {3, 5}; so the sequences (prompt-major)
// hold 7 9 | 13 14 | 3 4 | 7 9 tokens and the prompt groups 16, 27, 7, 16.
//   contiguous shares: rank 0 = 7+9+13+14 = 43, rank 1 = 3+4+7+9 = 23; mean = 66 / 2 = 33.
//   trainer.balance_batch: balanced_equal_partitions(16, 27, 7, 16) puts 27 on rank 0, 16 and 16 on
//   rank 1 (then full), 7 on rank 0: prompts {1, 2} = 13+14+3+4 = 34 and {0, 3} = 7+9+7+9 = 32.
// verl's own log_seqlen_unbalance (verl/utils/seqlen_balancing.py, re-implemented line by line in
// python3 from volcengine/verl b178a3c) on seqlen_list [7, 9, 13, 14, 3, 4, 7, 9] gives
//   partitions [[2,3,4,5],[0,1,6,7]]: min 23, max 43, minmax_diff 20, balanced_min 32,
//                                     balanced_max 34, mean 33.0
//   partitions [[0,1,2,3],[4,5,6,7]]: min 23, max 43, minmax_diff 20, balanced_min 23,
//                                     balanced_max 43, mean 33.0
//   partitions [[0..7]] (dp 1):       min 66, max 66, minmax_diff 0, balanced_min 66,
//                                     balanced_max 66, mean 66.0
TEST(Metrics, GlobalSeqlenFollowsVerlOverTheDpShares) {
  const std::vector<std::int64_t> seqlens = {7, 9, 13, 14, 3, 4, 7, 9};
  const auto prompts = balanced_equal_partitions({16, 27, 7, 16}, 2);
  ASSERT_EQ(prompts, (std::vector<std::vector<std::size_t>>{{1, 2}, {0, 3}}));
  std::vector<std::vector<std::size_t>> balanced(2);  // prompt i's samples are sequences 2i, 2i + 1
  for (std::size_t d = 0; d < 2; ++d)
    for (const auto i : prompts[d]) balanced[d].insert(balanced[d].end(), {2 * i, 2 * i + 1});

  auto m = as_map(seqlen_balance_metrics(seqlens, balanced));
  EXPECT_EQ(m.size(), 6u);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/min"), 23);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/max"), 43);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/minmax_diff"), 20);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/balanced_min"), 32);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/balanced_max"), 34);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/mean"), 33);

  // Without balance_batch the ranks train on the contiguous shares: balanced_* are min/max.
  m = as_map(seqlen_balance_metrics(seqlens, {{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/balanced_min"), 23);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/balanced_max"), 43);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/minmax_diff"), 20);

  m = as_map(seqlen_balance_metrics(seqlens, {{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/min"), 66);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/max"), 66);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/minmax_diff"), 0);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/balanced_max"), 66);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/mean"), 66);

  // The mean is Σ / dp, not rounded: 4 shares of 7+9 | 13+14 | 3+4 | 7+9 = 66 -> 16.5.
  m = as_map(seqlen_balance_metrics(seqlens, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/mean"), 16.5);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/min"), 7);
  EXPECT_DOUBLE_EQ(m.at("global_seqlen/max"), 27);

  EXPECT_THROW(seqlen_balance_metrics(seqlens, {}), std::invalid_argument);
  EXPECT_THROW(seqlen_balance_metrics(seqlens, {{0, 1, 2}, {3, 4, 5}, {6, 7}}), std::invalid_argument);
}

// The demo matrix's model (bench/matrices/demo-cpu.yaml): hidden C = 512, ffn F = 1536, L = 4
// layers, 8 heads of D = 64, 4 KV heads, the char tokenizer's V = 98 ids, untied LM head, float32.
//   per layer: q, o C·C = 262144 each; k, v 4·64·C = 131072 each; gate, up, down F·C = 786432
//              each; two norms C = 512 each -> 3146752
//   whole: embedding V·C = 50176 + 4 layers 12587008 + final norm 512 + LM head 50176
//          = 12687872 parameters = 50751488 bytes.
// Per rank in each training layout (LayoutSet::rank_bytes' boxes):
//   fsdp dp 2: every dim 0 is even (98, 512, 256, 1536) -> half of each: 25375744 bytes;
//   megatron tp 2: the embedding and the 9 norms replicated (50176 + 4608 = 54784), the rest
//              (12633088) halved -> 54784 + 6316544 = 6371328 parameters = 25485312 bytes;
//   megatron pp 2: stage 0 = embedding + layers 0-1 = 6343680, stage 1 = layers 2-3 + final norm
//              + LM head = 6344192 -> the larger, 25376768 bytes.
TEST(Metrics, ActorParamBytesAreTheWholeModelAndTheLargestRanksShare) {
  ModelShape shape;
  shape.vocab_size = 98;
  shape.hidden_size = 512;
  shape.intermediate_size = 1536;
  shape.num_hidden_layers = 4;
  shape.num_attention_heads = 8;
  shape.num_key_value_heads = 4;
  const Transformer model(shape, HeadKind::kLm);  // the parameters the trainer's actor holds
  const auto specs = parameter_specs(*model);
  std::int64_t numel = 0;
  for (const auto& p : model->parameters()) numel += p.numel();
  ASSERT_EQ(numel, 12687872);

  auto m = as_map(actor_param_metrics(training_layout(specs, {1, 1, 1}, DpSharding::kReplicated)));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes"), 50751488);
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes_per_rank"), 50751488);

  m = as_map(actor_param_metrics(training_layout(specs, {1, 1, 2}, DpSharding::kSharded)));
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes"), 50751488);
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes_per_rank"), 50751488 / 2);
  // Megatron keeps the parameters whole on every dp rank.
  m = as_map(actor_param_metrics(training_layout(specs, {1, 1, 2}, DpSharding::kReplicated)));
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes_per_rank"), 50751488);
  m = as_map(actor_param_metrics(training_layout(specs, {1, 2, 1}, DpSharding::kReplicated)));
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes_per_rank"), 25485312);
  m = as_map(actor_param_metrics(training_layout(specs, {2, 1, 1}, DpSharding::kReplicated)));
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes"), 50751488);
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes_per_rank"), 25376768);

  // The training dtype's element size: bfloat16 parameters are half the bytes.
  Transformer half(shape, HeadKind::kLm);
  half->to(torch::kBFloat16);
  m = as_map(actor_param_metrics(training_layout(parameter_specs(*half), {1, 1, 1}, DpSharding::kReplicated)));
  EXPECT_DOUBLE_EQ(m.at("perf/actor_param_bytes"), 50751488 / 2);
}
