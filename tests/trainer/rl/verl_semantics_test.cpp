// verl_semantics_test.cpp — one test per low-bit rule of verl (shared/anchors/verl-facts.md,
// "Exact semantics"), each against the scalar reference (core_algos_reference.h) or a hand value,
// each failing with the code before issue 17 (which cast masks to the values' dtype, put the
// epsilon on token-mean instead of seq-mean-token-mean, gave a group of one a float64 std of 1,
// and multiplied NaN padding by 0). verl_parity_test.cpp checks the same functions against
// verl's code op for op in every dtype.
#include "hybridscope/trainer/rl/core_algos.h"

#include "rl/core_algos_reference.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace hs::trainer {
namespace {

using namespace reference;

torch::Tensor to_tensor(const Mat& m, torch::ScalarType dtype = torch::kDouble) {
  Vec flat;
  for (const auto& row : m) flat.insert(flat.end(), row.begin(), row.end());
  return torch::tensor(flat, torch::kDouble)
      .reshape({static_cast<int64_t>(m.size()), static_cast<int64_t>(m.at(0).size())})
      .to(dtype);
}

// Values chosen so that the epsilons and float32 roundings are far above 1e-15 relative.
const Mat kValues = {{0.3, -1.7, 2.9, 0.0}, {1.1, 0.4, -0.6, 5.0}, {2.0, -3.0, 0.7, 1.3}};
const Mat kMask = {{1, 1, 1, 0}, {1, 1, 0, 0}, {1, 1, 1, 1}};  // N = 9

TEST(VerlSemantics, TokenMeanDividesByThePlainCount) {
  // 0.3 − 1.7 + 2.9 + 1.1 + 0.4 + 2.0 − 3.0 + 0.7 + 1.3 = 4.0, over 9 tokens (no + 1e-8).
  const double got = agg_loss(to_tensor(kValues), to_tensor(kMask), LossAggMode::kTokenMean).item<double>();
  // The epsilon would move it by 4/9·1e-8/9 ≈ 5e-10; summation order by at most ~1e-16.
  EXPECT_NEAR(got, 4.0 / 9.0, 1e-14);
  EXPECT_NEAR(got, ref_agg(kValues, kMask, LossAggMode::kTokenMean), 1e-14);
}

TEST(VerlSemantics, SeqMeanTokenMeanDividesEachRowByCountPlusEpsilon) {
  // Row means 1.5/(3 + 1e-8), 1.5/(2 + 1e-8), 1.0/(4 + 1e-8), averaged over 3 rows.
  const double want = (1.5 / (3 + 1e-8) + 1.5 / (2 + 1e-8) + 1.0 / (4 + 1e-8)) / 3.0;
  const double got = agg_loss(to_tensor(kValues), to_tensor(kMask), LossAggMode::kSeqMeanTokenMean).item<double>();
  EXPECT_NEAR(got, want, 1e-16);
  EXPECT_NEAR(got, ref_agg(kValues, kMask, LossAggMode::kSeqMeanTokenMean), 1e-16);
  EXPECT_GT(std::abs(got - (0.5 + 0.75 + 0.25) / 3.0), 1e-10);  // the epsilon is there
}

TEST(VerlSemantics, GrpoGroupOfOneDividesByFloat32OnePlusEpsilon) {
  // Scores 0.7 (uid 5, alone) and 1, 0 (uid 9). verl: (0.7 − 0) / (float32(1) + 1e-6).
  const auto rewards = to_tensor(Mat{{0.2, 0.5}, {1.0, 0.0}, {0.0, 0.0}});
  const auto mask = torch::ones({3, 2}, torch::kLong);
  const auto adv = compute_grpo_outcome_advantage(rewards, mask, {5, 9, 9}).advantages;
  EXPECT_EQ(ref_grpo_single_divisor(1e-6), 1.00000095367431640625);
  EXPECT_EQ(adv[0][0].item<double>(), 0.7 / 1.00000095367431640625);
  EXPECT_NE(adv[0][0].item<double>(), 0.7 / (1.0 + 1e-6));
  const auto want = ref_grpo({{0.2, 0.5}, {1.0, 0.0}, {0.0, 0.0}}, {{1, 1}, {1, 1}, {1, 1}}, {5, 9, 9}, 1e-6, true);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(adv[i][1].item<double>(), want[i][1], 1e-15);
  // float32 scores get the same float32 divisor.
  const auto adv32 = compute_grpo_outcome_advantage(rewards.to(torch::kFloat), mask, {5, 9, 9}).advantages;
  EXPECT_EQ(adv32[0][0].item<float>(), 0.7f / 1.00000095367431640625f);
}

TEST(VerlSemantics, IntegerAndBoolMasksMeanDividesByTheFloat32Count) {
  const auto v = to_tensor(kValues);
  for (const auto dtype : {torch::kLong, torch::kBool}) {
    const double got = masked_mean(v, to_tensor(kMask, dtype)).item<double>();
    EXPECT_NEAR(got, 4.0 / 9.0, 1e-14);  // float32(9 + 1e-8) = 9; the epsilon would move it by ~5e-10
    EXPECT_NEAR(got, ref_masked_mean_int(kValues, kMask), 1e-14);
  }
  // A float64 mask keeps the epsilon in float64.
  EXPECT_NEAR(masked_mean(v, to_tensor(kMask)).item<double>(), 4.0 / (9.0 + 1e-8), 1e-14);
  EXPECT_GT(std::abs(masked_mean(v, to_tensor(kMask)).item<double>() - 4.0 / 9.0), 1e-11);
}

TEST(VerlSemantics, IntegerMaskBesselFactorIsAFloat32Number) {
  const auto v = to_tensor(kValues);
  const double got = masked_var(v, to_tensor(kMask, torch::kLong)).item<double>();
  EXPECT_NEAR(got, ref_masked_var_int(kValues, kMask), 1e-15 * std::abs(got));
  // float32(9/8) = 1.125 exactly; pick a count whose N/(N−1) is not a float32 number: N = 7.
  const Mat m7 = {{1, 1, 1, 0}, {1, 0, 0, 0}, {1, 1, 1, 0}};
  const double got7 = masked_var(v, to_tensor(m7, torch::kLong)).item<double>();
  const double want7 = ref_masked_var_int(kValues, m7);
  EXPECT_NEAR(got7, want7, 1e-15 * std::abs(want7));
  EXPECT_GT(std::abs(got7 - ref_masked_var(kValues, m7)), 1e-9 * std::abs(want7));  // not the float64 factor
}

TEST(VerlSemantics, ClipFractionsAreFloat32WithAnIntegerMask) {
  // Three valid tokens, A = 1: ratios e^0.5 (clipped), 1 and 1 → pg_clipfrac = 1/3 as a float32.
  const auto old_lp = torch::zeros({1, 4}, torch::kDouble);
  const auto lp = torch::tensor({0.5, 0.0, 0.0, 0.0}, torch::kDouble).reshape({1, 4});
  const auto adv = torch::ones({1, 4}, torch::kDouble);
  const auto mask = torch::tensor({1, 1, 1, 0}, torch::kLong).reshape({1, 4});
  const auto out = compute_policy_loss(old_lp, lp, adv, mask, 0.2, 0.2, 3.0, LossAggMode::kTokenMean);
  EXPECT_EQ(out.pg_clipfrac.scalar_type(), torch::kFloat);
  EXPECT_EQ(out.pg_clipfrac.item<double>(), static_cast<double>(1.0f / 3.0f));
  const auto vout = compute_value_loss(torch::tensor({2.0, 0.0, 0.0, 0.0}, torch::kDouble).reshape({1, 4}),
                                       torch::tensor({3.0, 0.0, 0.0, 0.0}, torch::kDouble).reshape({1, 4}),
                                       torch::zeros({1, 4}, torch::kDouble), mask, 0.5, LossAggMode::kTokenMean);
  EXPECT_EQ(vout.vf_clipfrac.scalar_type(), torch::kFloat);
  EXPECT_EQ(vout.vf_clipfrac.item<double>(), static_cast<double>(1.0f / 3.0f));  // v 2 → clipped to 0.5
}

TEST(VerlSemantics, MaskedSumKeepsNanInPaddingOutAndTakesAnAxis) {
  auto v = to_tensor(kValues);
  v.index_put_({0, 3}, NAN);  // a padded slot
  const auto m = to_tensor(kMask, torch::kLong);
  EXPECT_NEAR(masked_sum(v, m).item<double>(), 4.0, 1e-14);
  const auto rows = masked_sum(v, m, -1);
  EXPECT_TRUE(torch::allclose(rows, torch::tensor({0.3 - 1.7 + 2.9, 1.1 + 0.4, 2.0 - 3.0 + 0.7 + 1.3}, torch::kDouble)));
  const auto cols = masked_sum(v, m, 0);
  EXPECT_TRUE(torch::allclose(cols, torch::tensor({0.3 + 1.1 + 2.0, -1.7 + 0.4 - 3.0, 2.9 + 0.7, 1.3}, torch::kDouble)));
  EXPECT_TRUE(std::isfinite(agg_loss(v, m, LossAggMode::kSeqMeanTokenSum).item<double>()));
}

TEST(VerlSemantics, AggLossWithGlobalBatchInfoIsTheGlobalMeanOverRanks) {
  // Two ranks hold rows {0, 1} and {2}; the mean over ranks of their losses with the global info
  // (9 tokens, 3 sequences, dp 2) is the single-process aggregate.
  const auto v = to_tensor(kValues);
  const auto m = to_tensor(kMask, torch::kLong);
  GlobalBatchInfo info;
  info.dp_size = 2;
  info.batch_num_tokens = 9;
  info.global_batch_size = 3;
  for (const auto mode : {LossAggMode::kTokenMean, LossAggMode::kSeqMeanTokenSum, LossAggMode::kSeqMeanTokenMean}) {
    const double rank0 = agg_loss(v.slice(0, 0, 2), m.slice(0, 0, 2), mode, info).item<double>();
    const double rank1 = agg_loss(v.slice(0, 2, 3), m.slice(0, 2, 3), mode, info).item<double>();
    EXPECT_NEAR((rank0 + rank1) / 2, agg_loss(v, m, mode).item<double>(), 1e-15) << to_string(mode);
  }
  // seq-mean-token-sum-norm: Σ l·m / loss_scale_factor, no dp factor (verl).
  info.loss_scale_factor = 8;
  EXPECT_NEAR(agg_loss(v, m, LossAggMode::kSeqMeanTokenSumNorm, info).item<double>(), 4.0 / 8, 1e-15);
}

TEST(VerlSemantics, RolloutIsWeightsScaleTheClippedLossButNotTheMetrics) {
  const auto old_lp = torch::zeros({1, 3}, torch::kDouble);
  const auto lp = torch::tensor({0.5, -0.1, 0.05}, torch::kDouble).reshape({1, 3});
  const auto adv = torch::tensor({1.0, -2.0, 0.5}, torch::kDouble).reshape({1, 3});
  const auto mask = torch::ones({1, 3}, torch::kLong);
  const auto w = torch::tensor({0.5, 2.0, 1.0}, torch::kDouble).reshape({1, 3});
  const auto plain = compute_policy_loss(old_lp, lp, adv, mask, 0.2, 0.2, 3.0, LossAggMode::kTokenMean);
  const auto weighted = compute_policy_loss(old_lp, lp, adv, mask, 0.2, 0.2, 3.0, LossAggMode::kTokenMean, {}, w);
  // Per-token clipped losses: −1·1.2 (ρ = e^0.5 clipped), −(−2)·max(e^−0.1, 0.8) = 2·e^−0.1, −0.5·e^0.05.
  const double l0 = -1.2, l1 = 2.0 * std::exp(-0.1), l2 = -0.5 * std::exp(0.05);
  EXPECT_NEAR(plain.pg_loss.item<double>(), (l0 + l1 + l2) / 3, 1e-15);
  EXPECT_NEAR(weighted.pg_loss.item<double>(), (0.5 * l0 + 2.0 * l1 + l2) / 3, 1e-15);
  EXPECT_EQ(weighted.pg_clipfrac.item<double>(), plain.pg_clipfrac.item<double>());
  EXPECT_EQ(weighted.ppo_kl.item<double>(), plain.ppo_kl.item<double>());
  EXPECT_EQ(weighted.pg_clipfrac_lower.item<double>(), plain.pg_clipfrac_lower.item<double>());
}

}  // namespace
}  // namespace hs::trainer
