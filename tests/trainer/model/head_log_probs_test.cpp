// head_log_probs_test.cpp — the chunked LM head (TransformerImpl::token_log_probs) against the
// whole-logits computation it replaces, forward and backward, and the memory of the log-prob and
// update passes bounded by the micro-batch at Qwen's 151,936-row vocabulary (issue 33).
//
// The reference is independent of the chunked code: the full logits (tokens, V) through LibTorch's
// own log_softmax / softmax and autograd, in float64.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/rl/pipeline.h"
#include "hybridscope/trainer/memory/cpu_memory_tracker.h"
#include "hybridscope/trainer/rl/core_algos.h"
#include "hybridscope/trainer/rl/ppo_workers.h"

using namespace hs::trainer;

namespace {

ModelShape shape_of(std::int64_t vocab, bool tied) {
  ModelShape s;
  s.vocab_size = vocab;
  s.hidden_size = 16;
  s.intermediate_size = 32;
  s.num_hidden_layers = 1;
  s.num_attention_heads = 2;
  s.num_key_value_heads = 1;
  s.max_position_embeddings = 64;
  s.tie_word_embeddings = tied;
  return s;
}

struct Case {
  bool tied;
  double temperature;
};

class ChunkedHead : public ::testing::TestWithParam<Case> {};

// Log-probs, entropies and the gradients of a loss that uses both, with chunks of 3 tokens (so
// 20 tokens take 7 chunks, the last one short), equal the full-logits reference to float64
// rounding.
TEST_P(ChunkedHead, EqualsTheFullLogitsForwardAndBackward) {
  const Case c = GetParam();
  torch::manual_seed(7);
  Transformer model(shape_of(37, c.tied), HeadKind::kLm);
  model->to(torch::kFloat64);
  const std::int64_t n = 20;
  auto hidden = torch::randn({n, 16}, torch::kFloat64).requires_grad_(true);
  auto labels = torch::randint(0, 37, {n}, torch::kLong);
  auto w_lp = torch::randn({n}, torch::kFloat64);
  auto w_h = torch::randn({n}, torch::kFloat64);

  // Reference: full logits through autograd.
  const auto params = model->named_parameters();
  const std::string head = c.tied ? "model.embed_tokens.weight" : "lm_head.weight";
  auto weight = params[head];
  auto logits = torch::matmul(hidden, weight.t()) / c.temperature;  // (n, V)
  auto ref_lp = torch::log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  auto ref_h = entropy_from_logits(logits);
  ((ref_lp * w_lp).sum() + (ref_h * w_h).sum()).backward();
  const auto ref_grad_hidden = hidden.grad().clone();
  const auto ref_grad_weight = weight.grad().clone();
  hidden.mutable_grad().zero_();
  weight.mutable_grad().zero_();

  const std::int64_t three_tokens = 3 * 37 * 4;
  auto [lp, h] = model->token_log_probs(hidden, labels, c.temperature, true, three_tokens);
  ((lp * w_lp).sum() + (h * w_h).sum()).backward();

  EXPECT_LT((lp - ref_lp).abs().max().item<double>(), 1e-12);
  EXPECT_LT((h - ref_h).abs().max().item<double>(), 1e-12);
  EXPECT_LT((hidden.grad() - ref_grad_hidden).abs().max().item<double>(), 1e-11);
  EXPECT_LT((weight.grad() - ref_grad_weight).abs().max().item<double>(), 1e-11);
  EXPECT_GT(ref_grad_weight.abs().max().item<double>(), 1e-3) << "the check has a gradient to compare";
}

INSTANTIATE_TEST_SUITE_P(TiedAndUntiedWithAndWithoutTemperature, ChunkedHead,
                         ::testing::Values(Case{true, 1.0}, Case{false, 1.0}, Case{true, 0.7}, Case{false, 0.6}));

// Without entropy in the loss, its gradient term is absent (an undefined output gradient), and
// the log-probs' gradient alone still matches.
TEST(ChunkedHead, LogProbsAloneBackpropagate) {
  torch::manual_seed(8);
  Transformer model(shape_of(29, false), HeadKind::kLm);
  model->to(torch::kFloat64);
  auto hidden = torch::randn({9, 16}, torch::kFloat64).requires_grad_(true);
  auto labels = torch::randint(0, 29, {9}, torch::kLong);
  auto weight = model->named_parameters()["lm_head.weight"];
  torch::log_softmax(torch::matmul(hidden, weight.t()), -1).gather(-1, labels.unsqueeze(-1)).sum().backward();
  const auto ref = hidden.grad().clone();
  hidden.mutable_grad().zero_();
  auto [lp, h] = model->token_log_probs(hidden, labels, 1.0, false, 2 * 29 * 4);
  EXPECT_FALSE(h.defined());
  lp.sum().backward();
  EXPECT_LT((hidden.grad() - ref).abs().max().item<double>(), 1e-12);
}

// response_log_probs (the hidden-state path every trainer pass takes) equals the full-logits
// path it replaced on a ragged batch.
TEST(ChunkedHead, ResponseLogProbsEqualTheLogitsPath) {
  torch::manual_seed(9);
  Transformer model(shape_of(16, true), HeadKind::kLm);
  model->to(torch::kFloat64);
  const std::vector<std::vector<std::int32_t>> prompts = {{1, 5, 6}, {1, 7}};
  const std::vector<std::vector<std::int32_t>> responses = {{3, 4, 2}, {5, 2}, {6, 7, 8, 9}, {2}};
  RolloutBatch b = make_rollout_batch(prompts, responses, 2, 0, 2);
  torch::NoGradGuard no_grad;
  auto [lp, h] = response_log_probs(model, b, 0.8, true);
  auto [ref_lp, ref_h] =
      response_log_probs_of_logits(model->forward(b.input_ids, b.attention_mask, b.position_ids), b, 0.8, true);
  EXPECT_LT((lp - ref_lp).abs().max().item<double>(), 1e-12);
  EXPECT_LT((h - ref_h).abs().max().item<double>(), 1e-12);
}

// --- memory at Qwen's vocabulary ---------------------------------------------------------------------

constexpr std::int64_t kQwenVocab = 151936;
constexpr std::int64_t kPrompt = 8, kResponse = 16, kMicro = 4;

RolloutBatch batch_of(std::int64_t sequences) {
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(sequences)),
      responses(static_cast<std::size_t>(sequences));
  for (std::int64_t i = 0; i < sequences; ++i) {
    for (std::int64_t t = 0; t < kPrompt; ++t) prompts[i].push_back(static_cast<std::int32_t>(3 + (i * 7 + t) % 1000));
    for (std::int64_t t = 0; t < kResponse; ++t)
      responses[i].push_back(static_cast<std::int32_t>(5 + (i * 13 + t * 31) % 150000));
  }
  RolloutBatch b = make_rollout_batch(prompts, responses, 1, 0, 2);
  b.advantages = torch::randn({b.size(), b.response_length()}) * b.response_mask;
  return b;
}

// Bytes above what was live before `fn`, at the CPU tracker's peak while it ran.
template <typename Fn>
std::int64_t peak_above(Fn&& fn) {
  const auto before = cpu_memory_stats().live_bytes;
  reset_cpu_memory_peak();
  fn();
  return cpu_memory_stats().peak_bytes - before;
}

struct PhasePeaks {
  std::int64_t old_log_prob = 0, ref = 0, update_actor = 0;
};

PhasePeaks phase_peaks(std::int64_t sequences) {
  torch::manual_seed(11);
  ModelShape shape = shape_of(kQwenVocab, true);
  shape.hidden_size = 32;
  shape.intermediate_size = 64;
  Transformer policy(shape, HeadKind::kLm);
  Transformer reference(shape, HeadKind::kLm);
  ActorConfig cfg;
  cfg.ppo_mini_batch_size = static_cast<int>(sequences);  // one mini-batch of the whole batch
  cfg.ppo_micro_batch_size_per_gpu = static_cast<int>(kMicro);
  cfg.entropy_coeff = 0.01;
  PPOActor actor(policy, cfg, 1.0, 1, 10);
  RolloutBatch batch = batch_of(sequences);
  ActorRolloutRefConfig arr;
  arr.actor = cfg;
  const int micro = arr.log_prob_micro_batch(arr.rollout.log_prob_micro_batch_size_per_gpu);  // -1: the actor's
  PhasePeaks p;
  p.old_log_prob = peak_above([&] { batch.old_log_probs = actor.compute_log_prob(batch, micro); });
  p.ref = peak_above([&] { micro_batched_log_probs(reference, batch, micro, 1.0); });
  // A first update creates AdamW's moments (as every run's first step does); the second one is
  // the steady state the peak is read from.
  actor.update_policy(batch, 1, 1);
  p.update_actor = peak_above([&] { actor.update_policy(batch, 2, 2); });
  return p;
}

// Doubling data.train_batch_size at a fixed micro-batch moves the peak of every pass by < 10 %,
// and each peak is what the shapes say: float32 logits of one micro-batch's response tokens
// (kMicro · R · V · 4 bytes), two or three of them alive at once, plus the head's gradient
// (V · C · 4) in the update. Before the chunked head, the log-prob passes held the whole batch's (B, P+R, V) logits.
TEST(MemoryBound, PhasePeaksFollowTheMicroBatchNotTheBatch) {
  install_cpu_memory_tracker();
  ASSERT_TRUE(cpu_memory_tracker_installed());
  const PhasePeaks small = phase_peaks(16);
  const PhasePeaks large = phase_peaks(32);
  uninstall_cpu_memory_tracker();

  const double logits = static_cast<double>(kMicro * kResponse * kQwenVocab * 4);  // one (tokens, V) float32
  const double head_grad = static_cast<double>(kQwenVocab * 32 * 4);
  const double whole_batch = static_cast<double>(32 * (kPrompt + kResponse) * kQwenVocab * 4);
  const std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> passes = {
      {"old_log_prob", {small.old_log_prob, large.old_log_prob}},
      {"ref", {small.ref, large.ref}},
      {"update_actor", {small.update_actor, large.update_actor}}};
  for (const auto& [name, peaks] : passes) {
    const auto [at16, at32] = peaks;
    std::cout << "[  peak    ] " << name << ": " << at16 / 1e6 << " MB at 16 sequences, " << at32 / 1e6
              << " MB at 32 (" << static_cast<double>(at32) / logits << " x one micro-batch's logits)\n";
    EXPECT_LT(std::abs(static_cast<double>(at32 - at16)), 0.10 * static_cast<double>(at16))
        << name << ": " << at16 << " bytes at 16 sequences, " << at32 << " at 32";
    // The estimate: two logits-sized tensors alive in a forward (the logits and their softmax, the
    // product formed in the softmax's storage; measured 2.00x), at most three in the update's
    // backward (log p and p, the gradient formed in place) plus the head's gradient and its
    // accumulation buffer (measured 2.51x); up to one more is allowed for LibTorch's temporaries.
    const double low = logits, high = name == "update_actor" ? 4 * logits + 2 * head_grad : 3 * logits;
    EXPECT_GE(static_cast<double>(at32), low) << name;
    EXPECT_LE(static_cast<double>(at32), high) << name << ": " << at32 / logits << " x one micro-batch's logits";
    // The log-prob passes held the whole batch's (B, P+R, V) logits in one pass before.
    if (name != "update_actor") EXPECT_LT(static_cast<double>(at32), whole_batch / 2) << name;
  }
}

}  // namespace
