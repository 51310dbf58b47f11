// advantage_test.cpp — compute_advantage (verl's ray_trainer.compute_advantage): each
// algorithm.adv_estimator reaches its estimator with the algorithm section's arguments. The
// outcome estimators are checked against values worked out by hand below; the estimators
// themselves are checked against an independent reference in core_algos_test.cpp.
#include "hybridscope/trainer/rl/advantage.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace hs::trainer {
namespace {

// Four samples of two prompts (uid 0, 0, 1, 1), three response tokens; the last sample stops after
// two. Outcome scores 1, 0, 1, 1 sit on each sample's last token.
RolloutBatch outcome_batch() {
  RolloutBatch b;
  b.response_mask = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0}, torch::kDouble).reshape({4, 3});
  b.token_level_rewards =
      torch::tensor({0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0}, torch::kDouble).reshape({4, 3});
  b.uid = {0, 0, 1, 1};
  b.values = torch::tensor({0.1, 0.2, 0.3, 0.0, 0.5, 0.1, 0.2, 0.2, 0.2, 0.4, 0.3, 0.0}, torch::kDouble).reshape({4, 3});
  b.reward_baselines = torch::tensor({0.25, 0.5, 0.0, 1.0}, torch::kDouble);
  return b;
}

/// Per-sample advantage broadcast over the sample's valid tokens.
torch::Tensor per_sample(const std::vector<double>& a, const torch::Tensor& mask) {
  return torch::tensor(a, torch::kDouble).unsqueeze(1) * mask;
}

void expect_equal(const torch::Tensor& got, const torch::Tensor& want, double tol = 1e-12) {
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LE((got.to(torch::kDouble) - want).abs().max().item<double>(), tol) << got << "\nwant\n" << want;
}

AlgorithmConfig with(AdvEstimator estimator) {
  AlgorithmConfig a;
  a.adv_estimator = estimator;
  return a;
}

TEST(ComputeAdvantage, GrpoNormalisesEachGroupByItsStdUnlessTurnedOff) {
  const RolloutBatch b = outcome_batch();
  // Group 0: scores 1 and 0, mean 0.5, unbiased std sqrt(0.5); group 1: equal scores, std 0.
  const double a = 0.5 / (std::sqrt(0.5) + 1e-6);
  AlgorithmConfig alg = with(AdvEstimator::kGrpo);
  expect_equal(compute_advantage(b, alg).advantages, per_sample({a, -a, 0.0, 0.0}, b.response_mask));
  alg.norm_adv_by_std_in_grpo = false;  // Dr. GRPO: the score minus the group mean
  expect_equal(compute_advantage(b, alg).advantages, per_sample({0.5, -0.5, 0.0, 0.0}, b.response_mask));
}

TEST(ComputeAdvantage, RlooSubtractsTheMeanOfTheOtherSamples) {
  const RolloutBatch b = outcome_batch();
  const AdvantageReturn r = compute_advantage(b, with(AdvEstimator::kRloo));
  expect_equal(r.advantages, per_sample({1.0, -1.0, 0.0, 0.0}, b.response_mask));
  expect_equal(r.returns, r.advantages);
}

TEST(ComputeAdvantage, RemaxSubtractsTheGreedyBaselineFromTheReturn) {
  const RolloutBatch b = outcome_batch();
  // Each sample's return-to-go is its outcome score on every valid token.
  const AdvantageReturn r = compute_advantage(b, with(AdvEstimator::kRemax));
  expect_equal(r.advantages, per_sample({0.75, -0.5, 1.0, 0.0}, b.response_mask));
  expect_equal(r.returns, per_sample({1.0, 0.0, 1.0, 1.0}, b.response_mask));
}

TEST(ComputeAdvantage, GaeAndReinforcePlusPlusTakeGammaAndLambdaFromTheAlgorithmSection) {
  const RolloutBatch b = outcome_batch();
  AlgorithmConfig alg = with(AdvEstimator::kGae);
  alg.gamma = 0.9;
  alg.lam = 0.8;
  const auto gae = compute_advantage(b, alg);
  const auto direct = compute_gae_advantage_return(b.token_level_rewards, b.values, b.response_mask, 0.9, 0.8);
  expect_equal(gae.advantages, direct.advantages);
  expect_equal(gae.returns, direct.returns);
  // Sample 0's last token: delta = r - V = 1 - 0.3, the return there r = 1 (nothing after it).
  EXPECT_NEAR(gae.returns[0][2].item<double>(), 1.0, 1e-12);
  alg.lam = 1.0;
  EXPECT_GT((compute_advantage(b, alg).returns - gae.returns).abs().max().item<double>(), 1e-3);

  alg = with(AdvEstimator::kReinforcePlusPlus);
  alg.gamma = 0.5;
  const auto rpp = compute_advantage(b, alg);
  // Sample 0's discounted return-to-go: 0.25, 0.5, 1 (before whitening over the batch).
  expect_equal(rpp.returns[0], torch::tensor({0.25, 0.5, 1.0}, torch::kDouble));
  expect_equal(rpp.advantages,
               compute_reinforce_plus_plus_outcome_advantage(b.token_level_rewards, b.response_mask, 0.5).advantages);

  const auto base = compute_advantage(b, with(AdvEstimator::kReinforcePlusPlusBaseline));
  expect_equal(base.advantages, compute_reinforce_plus_plus_baseline_outcome_advantage(
                                    b.token_level_rewards, b.response_mask, b.uid).advantages);
}

}  // namespace
}  // namespace hs::trainer
