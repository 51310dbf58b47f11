// ppo_workers_test.cpp — gradient accumulation over micro-batches equals one pass over the whole
// mini-batch (every aggregation mode, actor and critic), the LR schedule, and batch building.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/rl/ppo_workers.h"

using namespace hs::trainer;

namespace {

ModelShape tiny_shape() {
  ModelShape s;
  s.vocab_size = 16;
  s.hidden_size = 16;
  s.intermediate_size = 32;
  s.num_hidden_layers = 1;
  s.num_attention_heads = 2;
  s.num_key_value_heads = 1;
  s.max_position_embeddings = 32;
  return s;
}

// 6 samples (3 prompts x 2) with ragged prompts and responses, one response that is EOS only.
RolloutBatch ragged_batch() {
  const std::vector<std::vector<std::int32_t>> prompts = {{1, 5, 6}, {1, 7}, {1, 8, 9, 10}};
  const std::vector<std::vector<std::int32_t>> responses = {
      {3, 4, 2}, {5, 2}, {6, 7, 8, 9}, {2}, {4, 4, 4, 2}, {11, 2}};
  RolloutBatch b = make_rollout_batch(prompts, responses, 2, 0, 2);
  torch::manual_seed(3);
  b.advantages = torch::randn({b.size(), b.response_length()}, torch::kFloat64) * b.response_mask;
  b.returns = torch::randn({b.size(), b.response_length()}, torch::kFloat64) * b.response_mask;
  return b;
}

std::vector<torch::Tensor> grads_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

// A float64 model of `head` with the same weights as `reference`.
Transformer clone_of(Transformer& reference, HeadKind head) {
  Transformer model(tiny_shape(), head);
  model->to(torch::kFloat64);
  torch::NoGradGuard g;
  auto src = reference->parameters();
  auto dst = model->parameters();
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  return model;
}

double worst_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

class GradAccumulation : public ::testing::TestWithParam<LossAggMode> {};

TEST_P(GradAccumulation, ActorMicroBatchesEqualTheFullMiniBatch) {
  torch::manual_seed(0);
  Transformer reference(tiny_shape(), HeadKind::kLm);
  reference->to(torch::kFloat64);
  RolloutBatch batch = ragged_batch();

  std::vector<std::vector<torch::Tensor>> grads;
  for (const int micro : {-1, 2, 1, 0}) {  // 0: dynamic batch size under a token budget
    Transformer model = clone_of(reference, HeadKind::kLm);
    ActorConfig cfg;
    cfg.ppo_mini_batch_size = 3;  // prompts: the whole batch is one mini-batch
    cfg.ppo_micro_batch_size_per_gpu = micro == 0 ? -1 : micro;
    cfg.use_dynamic_bsz = micro == 0;
    cfg.ppo_max_token_len_per_gpu = 14;
    cfg.loss_agg_mode = GetParam();
    cfg.entropy_coeff = 0.01;
    cfg.grad_clip = 1e12;
    cfg.optim.lr = 0.0;  // gradients are what we compare; keep the weights fixed
    PPOActor actor(model, cfg, 1.0, 2, 10);
    batch.old_log_probs = actor.compute_log_prob(batch, -1) + 0.05;  // ratios != 1 so clipping is exercised
    actor.update_policy(batch, 0, 1);
    grads.push_back(grads_of(*model));
  }
  const double d2 = worst_difference(grads[0], grads[1]);
  const double d1 = worst_difference(grads[0], grads[2]);
  EXPECT_LT(d2, 1e-8) << "micro-batch 2 vs whole, mode " << to_string(GetParam());
  EXPECT_LT(d1, 1e-8) << "micro-batch 1 vs whole, mode " << to_string(GetParam());
  EXPECT_LT(worst_difference(grads[0], grads[3]), 1e-8) << "token budget vs whole, mode " << to_string(GetParam());
  double norm = 0;
  for (auto& g : grads[0]) norm += g.pow(2).sum().item<double>();
  EXPECT_GT(norm, 0.0);
}

TEST_P(GradAccumulation, CriticMicroBatchesEqualTheFullMiniBatch) {
  torch::manual_seed(1);
  Transformer reference(tiny_shape(), HeadKind::kValue);
  reference->to(torch::kFloat64);
  RolloutBatch batch = ragged_batch();
  std::vector<std::vector<torch::Tensor>> grads;
  for (const int micro : {-1, 4}) {
    Transformer model = clone_of(reference, HeadKind::kValue);
    CriticConfig cfg;
    cfg.ppo_mini_batch_size = 3;
    cfg.ppo_micro_batch_size_per_gpu = micro;
    cfg.loss_agg_mode = GetParam();
    cfg.grad_clip = 1e12;
    cfg.optim.lr = 0.0;
    PPOCritic critic(model, cfg, 2, 10);
    batch.values = critic.compute_values(batch, -1) + 0.3;  // old values so clipping is exercised
    critic.update_critic(batch, 0);
    grads.push_back(grads_of(*model));
  }
  EXPECT_LT(worst_difference(grads[0], grads[1]), 1e-8) << to_string(GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllModes, GradAccumulation,
                         ::testing::Values(LossAggMode::kTokenMean, LossAggMode::kSeqMeanTokenSum,
                                           LossAggMode::kSeqMeanTokenMean, LossAggMode::kSeqMeanTokenSumNorm));

// use_remove_padding: the actor's old log-probs, entropy-bearing loss, metrics and every gradient,
// and the critic's values, loss and gradients, packed equal padded (float64, to rounding) under
// fixed micro-batches, one whole mini-batch and a token budget.
TEST(RemovePadding, ActorAndCriticPackedEqualPadded) {
  torch::manual_seed(4);
  Transformer actor_reference(tiny_shape(), HeadKind::kLm);
  actor_reference->to(torch::kFloat64);
  Transformer critic_reference(tiny_shape(), HeadKind::kValue);
  critic_reference->to(torch::kFloat64);
  RolloutBatch batch = ragged_batch();
  batch.ref_log_probs = -torch::rand({batch.size(), batch.response_length()}, torch::kFloat64) - 1.0;
  batch.values = torch::randn({batch.size(), batch.response_length()}, torch::kFloat64) * batch.response_mask;
  for (const int micro : {-1, 2, 0}) {  // 0: dynamic batch size under a token budget
    SCOPED_TRACE("micro " + std::to_string(micro));
    struct Result {
      torch::Tensor log_probs, values;
      Metrics actor, critic;
      std::vector<torch::Tensor> actor_grads, critic_grads;
    };
    std::vector<Result> results;
    for (const bool packed : {false, true}) {
      ComputeOptions compute;
      compute.remove_padding = packed;
      Result r;
      Transformer model = clone_of(actor_reference, HeadKind::kLm);
      model->set_compute(compute);
      ActorConfig cfg;
      cfg.ppo_mini_batch_size = 3;
      cfg.ppo_micro_batch_size_per_gpu = micro == 0 ? -1 : micro;
      cfg.use_dynamic_bsz = micro == 0;
      cfg.ppo_max_token_len_per_gpu = 14;
      cfg.entropy_coeff = 0.01;
      cfg.use_kl_loss = true;
      cfg.grad_clip = 1e12;
      cfg.optim.lr = 0.0;
      PPOActor actor(model, cfg, 1.0, 2, 10);
      r.log_probs = actor.compute_log_prob(batch, micro == 0 ? -1 : micro);
      batch.old_log_probs = r.log_probs.detach() + 0.05;
      r.actor = actor.update_policy(batch, 0, 1);
      r.actor_grads = grads_of(*model);

      Transformer critic_model = clone_of(critic_reference, HeadKind::kValue);
      critic_model->set_compute(compute);
      CriticConfig ccfg;
      ccfg.ppo_mini_batch_size = 3;
      ccfg.ppo_micro_batch_size_per_gpu = micro == 0 ? -1 : micro;
      ccfg.use_dynamic_bsz = micro == 0;
      ccfg.ppo_max_token_len_per_gpu = 14;
      ccfg.grad_clip = 1e12;
      ccfg.optim.lr = 0.0;
      PPOCritic critic(critic_model, ccfg, 2, 10);
      r.values = critic.compute_values(batch, micro == 0 ? -1 : micro);
      r.critic = critic.update_critic(batch, 0);
      r.critic_grads = grads_of(*critic_model);
      results.push_back(std::move(r));
    }
    const auto& mask = batch.response_mask;
    EXPECT_LT(((results[0].log_probs - results[1].log_probs) * mask).abs().max().item<double>(), 1e-12);
    EXPECT_LT(((results[0].values - results[1].values) * mask).abs().max().item<double>(), 1e-12);
    EXPECT_LT(worst_difference(results[0].actor_grads, results[1].actor_grads), 1e-10);
    EXPECT_LT(worst_difference(results[0].critic_grads, results[1].critic_grads), 1e-10);
    for (const bool actor_side : {true, false}) {
      const Metrics& padded = actor_side ? results[0].actor : results[0].critic;
      const Metrics& packed = actor_side ? results[1].actor : results[1].critic;
      ASSERT_EQ(padded.size(), packed.size());
      for (std::size_t i = 0; i < padded.size(); ++i) {
        EXPECT_EQ(padded[i].first, packed[i].first);
        EXPECT_NEAR(padded[i].second, packed[i].second, 1e-10 * std::max(1.0, std::abs(padded[i].second)))
            << padded[i].first;
      }
    }
  }
}

TEST(LrSchedule, LinearWarmupThenConstantOrCosine) {
  OptimConfig o;
  o.lr_warmup_steps = 4;
  EXPECT_DOUBLE_EQ(lr_multiplier(o, 0, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_multiplier(o, 2, 100), 0.5);
  EXPECT_DOUBLE_EQ(lr_multiplier(o, 4, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_multiplier(o, 90, 100), 1.0);
  o.lr_warmup_steps = -1;
  o.lr_warmup_steps_ratio = 0.1;
  EXPECT_DOUBLE_EQ(lr_multiplier(o, 5, 100), 0.5);  // 10 warm-up steps
  o.warmup_style = WarmupStyle::kCosine;
  o.min_lr_ratio = 0.1;
  EXPECT_NEAR(lr_multiplier(o, 10, 100), 1.0, 1e-12);
  EXPECT_NEAR(lr_multiplier(o, 55, 100), 0.1 + 0.9 * 0.5, 1e-12);  // half way: cos(pi/2) = 0
  EXPECT_NEAR(lr_multiplier(o, 100, 100), 0.1, 1e-12);
}

// hybridscope.fused_adamw: ATen's fused AdamW against LibTorch's AdamW on the same parameters and
// gradients, over steps with a changing learning rate, weight decay, a parameter left without a
// gradient for a step, and the two paths alternating on one optimizer (they share the state).
TEST(FusedAdamW, TakesLibTorchsAdamWSteps) {
  torch::manual_seed(4);
  torch::nn::Sequential reference(torch::nn::Linear(6, 5), torch::nn::Linear(5, 3));
  torch::nn::Sequential fused(torch::nn::Linear(6, 5), torch::nn::Linear(5, 3));
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < reference->parameters().size(); ++i)
      fused->parameters()[i].copy_(reference->parameters()[i]);
  }
  OptimConfig o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.lr_warmup_steps = 3;
  Optimizer a(*reference, o, /*grad_clip=*/0.0, 10, ParallelContext{});
  Optimizer b(*fused, o, 0.0, 10, ParallelContext{});
  b.set_fused(true);
  ASSERT_TRUE(b.fused());
  for (int step = 0; step < 6; ++step) {
    a.set_schedule_step(step + 1);
    b.set_schedule_step(step + 1);
    const auto x = torch::randn({4, 6});
    for (auto* optimizer : {&a, &b}) optimizer->zero_grad();
    reference->forward(x).pow(2).sum().backward();
    fused->forward(x).pow(2).sum().backward();
    if (step == 2) {  // one parameter without a gradient: neither path steps it nor counts its step
      reference->parameters()[1].mutable_grad() = torch::Tensor();
      fused->parameters()[1].mutable_grad() = torch::Tensor();
    }
    if (step == 4) b.set_fused(false);  // the state is shared: the paths continue each other's steps
    if (step == 5) b.set_fused(true);
    a.step();
    b.step();
    for (std::size_t i = 0; i < reference->parameters().size(); ++i) {
      const auto p = reference->parameters()[i];  // parameters() returns a fresh vector: copy the handles
      const auto q = fused->parameters()[i];
      EXPECT_LE((p - q).abs().max().item<double>(), 1e-6 * (1.0 + p.abs().max().item<double>()))
          << "step " << step << " parameter " << i;
    }
  }
  const auto sa = a.state_tensors(), sb = b.state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    // The fused kernel forms the moments with lerp and fma: float32 rounding apart, no more.
    const double scale = sa[i].abs().max().item<double>();
    EXPECT_LE((sa[i] - sb[i]).abs().max().item<double>(), 1e-5 * scale) << "state " << i << " of scale " << scale;
  }
  for (std::size_t i = 0; i < reference->parameters().size(); ++i) {
    auto step_of = [](Optimizer& opt, const torch::Tensor& p) {
      return static_cast<const torch::optim::AdamWParamState&>(*opt.adamw().state().at(p.unsafeGetTensorImpl())).step();
    };
    EXPECT_EQ(step_of(a, reference->parameters()[i]), step_of(b, fused->parameters()[i])) << "parameter " << i;
  }
  EXPECT_EQ(static_cast<const torch::optim::AdamWParamState&>(
                *b.adamw().state().at(fused->parameters()[1].unsafeGetTensorImpl()))
                .step(),
            5)
      << "the step without a gradient is not counted";
}

TEST(RolloutBatch, PaddingMasksAndPositions) {
  const RolloutBatch b = make_rollout_batch({{1, 5, 6}, {1, 7}}, {{3, 2, 9}, {4, 4}, {2}, {8}}, 2, 0, 2);
  ASSERT_EQ(b.size(), 4);
  EXPECT_EQ(b.prompt_length(), 3);
  EXPECT_EQ(b.response_length(), 3);
  // prompt 1 is left-padded
  EXPECT_EQ(b.prompts[2][0].item<std::int64_t>(), 0);
  EXPECT_EQ(b.attention_mask[2][0].item<std::int64_t>(), 0);
  // the response mask covers up to and including EOS, nothing after it
  EXPECT_EQ(b.response_mask[0].sum().item<double>(), 2.0);
  EXPECT_EQ(b.response_mask[1].sum().item<double>(), 2.0);  // no EOS: every generated token
  EXPECT_EQ(b.response_mask[2].sum().item<double>(), 1.0);
  // positions run over real tokens: the first response token follows the prompt
  EXPECT_EQ(b.position_ids[0][3].item<std::int64_t>(), 3);
  EXPECT_EQ(b.position_ids[2][3].item<std::int64_t>(), 2);
  EXPECT_EQ(b.uid, (std::vector<std::int64_t>{0, 0, 1, 1}));
  const RolloutBatch s = b.select({3, 0});
  EXPECT_EQ(s.uid, (std::vector<std::int64_t>{1, 0}));
  EXPECT_TRUE(torch::equal(s.responses[1], b.responses[0]));
}

TEST(SplitRows, TokenBudgetPartitionsFitAndCoverEveryRow) {
  // real tokens per row: 9, 3, 7, 5, 2, 8 (total 34)
  const std::vector<std::int64_t> lengths = {9, 3, 7, 5, 2, 8};
  auto mask = torch::zeros({6, 10}, torch::kInt64);
  for (std::int64_t r = 0; r < 6; ++r) mask[r].slice(0, 0, lengths[static_cast<std::size_t>(r)]).fill_(1);
  const auto parts = split_rows_by_tokens(mask, 12);
  ASSERT_EQ(parts.size(), 3u);  // ceil(34 / 12) partitions suffice here
  std::vector<int> seen(6, 0);
  for (const auto& part : parts) {
    std::int64_t tokens = 0;
    for (auto r : part) {
      tokens += lengths[static_cast<std::size_t>(r)];
      ++seen[static_cast<std::size_t>(r)];
    }
    EXPECT_LE(tokens, 12);
  }
  EXPECT_EQ(seen, std::vector<int>(6, 1));
  // a row longer than the budget gets a partition of its own
  const auto alone = split_rows_by_tokens(mask, 8);
  bool nine_alone = false;
  for (const auto& part : alone) nine_alone |= (part == std::vector<std::int64_t>{0});
  EXPECT_TRUE(nine_alone);
}

// use_dynamic_bsz counts real tokens (attention_mask), as verl's rearrange_micro_batches: rows of
// 20 padded positions with 2..6 real tokens (left padding, as prompts are) share micro-batches of a
// 12-token budget that no padded row would fit, in the fewest partitions, balanced.
TEST(SplitRows, TokenBudgetCountsRealTokensAndBalancesThePartitions) {
  const std::vector<std::int64_t> lengths = {6, 2, 5, 3, 4, 6, 2, 5};  // 33 real tokens
  auto mask = torch::zeros({8, 20}, torch::kInt64);
  for (std::int64_t r = 0; r < 8; ++r) mask[r].slice(0, 20 - lengths[static_cast<std::size_t>(r)]).fill_(1);
  const auto parts = split_rows_by_tokens(mask, 12);
  ASSERT_EQ(parts.size(), 3u);  // ceil(33 / 12)
  std::vector<int> seen(8, 0);
  std::int64_t lightest = 1 << 30, heaviest = 0;
  for (const auto& part : parts) {
    std::int64_t tokens = 0;
    for (auto r : part) {
      tokens += lengths[static_cast<std::size_t>(r)];
      ++seen[static_cast<std::size_t>(r)];
    }
    EXPECT_LE(tokens, 12);
    lightest = std::min(lightest, tokens);
    heaviest = std::max(heaviest, tokens);
  }
  EXPECT_EQ(seen, std::vector<int>(8, 1));
  EXPECT_LE(heaviest - lightest, 6) << "partitions differ by more than the longest row";
}

TEST(SplitRows, CoversEveryRowOnce) {
  const auto parts = split_rows(7, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2], (std::vector<std::int64_t>{6}));
  EXPECT_EQ(split_rows(5, -1).size(), 1u);
}

}  // namespace

namespace hs::trainer {
namespace {

// trainer.balance_batch: equal counts per dp rank, token totals within the largest item of each
// other, every item once, deterministic; a contiguous split of the same skewed input is far off.
TEST(BalanceBatch, EqualCountsAndTotalsWithinTheLargestItem) {
  std::vector<std::int64_t> tokens;
  for (int i = 0; i < 32; ++i) tokens.push_back(i < 8 ? 90 + i : 10 + (i * 7) % 13);  // the long groups first
  const auto parts = balanced_equal_partitions(tokens, 4);
  ASSERT_EQ(parts.size(), 4u);
  std::vector<int> seen(tokens.size(), 0);
  std::int64_t lo = 1 << 30, hi = 0;
  for (const auto& part : parts) {
    EXPECT_EQ(part.size(), 8u);
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
    std::int64_t total = 0;
    for (const auto i : part) {
      ++seen[i];
      total += tokens[i];
    }
    lo = std::min(lo, total);
    hi = std::max(hi, total);
  }
  for (const int s : seen) EXPECT_EQ(s, 1);
  EXPECT_LE(hi - lo, *std::max_element(tokens.begin(), tokens.end()));
  EXPECT_EQ(parts, balanced_equal_partitions(tokens, 4));
  // The contiguous split puts all eight long groups on rank 0.
  std::int64_t first = 0, last = 0;
  for (int i = 0; i < 8; ++i) first += tokens[static_cast<std::size_t>(i)], last += tokens[static_cast<std::size_t>(24 + i)];
  EXPECT_GT(first - last, 4 * (hi - lo));
  EXPECT_THROW(balanced_equal_partitions(tokens, 5), std::invalid_argument);
}

}  // namespace
}  // namespace hs::trainer
