// core_algos_test.cpp — checks trainer/src/rl/core_algos.cpp against an independent reference.
//
// The reference (core_algos_reference.h) is a straightforward scalar re-implementation of
// verl's formulas (shared/anchors/verl-facts.md) with plain loops over std::vector<double>; it
// never calls the functions under test. Everything runs in float64 and is compared element by element; each
// comparison prints its worst |difference| and the suite prints the worst of all at the end.
// A few small cases are worked out by hand in the comments next to them.
#include "hybridscope/trainer/rl/core_algos.h"

#include "rl/core_algos_reference.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace hs::trainer {
namespace {

using namespace reference;  // Vec, Mat and the ref_* functions

constexpr double kTol = 1e-10;  // float64 agreement with the reference

// ---- tensor <-> vector glue ----

torch::Tensor to_tensor(const Mat& m) {
  Vec flat;
  for (const auto& row : m) flat.insert(flat.end(), row.begin(), row.end());
  return torch::tensor(flat, torch::kDouble).reshape({static_cast<int64_t>(m.size()),
                                                      static_cast<int64_t>(m.at(0).size())});
}
torch::Tensor to_tensor(const Vec& v) { return torch::tensor(v, torch::kDouble); }

Vec flat_values(const torch::Tensor& t) {
  const auto c = t.detach().to(torch::kDouble).cpu().contiguous();
  return Vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Worst |difference| over all checks in this process, printed by the environment at the end.
double g_worst_diff = 0.0;

/// Compares tensor `actual` with the reference values (flattened), prints and asserts.
void expect_close(const torch::Tensor& actual, const Vec& expected, const std::string& what,
                  double tol = kTol) {
  const Vec got = flat_values(actual);
  ASSERT_EQ(got.size(), expected.size()) << what;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " [" << i << "] = " << got[i];
    worst = std::max(worst, std::abs(got[i] - expected[i]));
  }
  if (tol <= kTol) g_worst_diff = std::max(g_worst_diff, worst);
  std::printf("[  max|d|  ] %-58s %.3e\n", what.c_str(), worst);
  EXPECT_LE(worst, tol) << what;
}
void expect_close(const torch::Tensor& actual, const Mat& expected, const std::string& what,
                  double tol = kTol) {
  Vec flat;
  for (const auto& row : expected) flat.insert(flat.end(), row.begin(), row.end());
  expect_close(actual, flat, what, tol);
}
void expect_close(const torch::Tensor& actual, double expected, const std::string& what,
                  double tol = kTol) {
  expect_close(actual, Vec{expected}, what, tol);
}

class WorstDiffReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf("[  max|d|  ] worst over all float64 checks: %.3e (tolerance %.0e)\n", g_worst_diff, kTol);
  }
};
[[maybe_unused]] const auto* const g_reporter = ::testing::AddGlobalTestEnvironment(new WorstDiffReporter);

// ---- test data ----

Mat random_mat(size_t rows, size_t cols, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Mat m(rows, Vec(cols));
  for (auto& row : m)
    for (auto& x : row) x = dist(rng);
  return m;
}

/// Ragged masks: row i is 1 for its first lengths[i] tokens.
Mat prefix_mask(const std::vector<size_t>& lengths, size_t cols) {
  Mat m(lengths.size(), Vec(cols, 0.0));
  for (size_t i = 0; i < lengths.size(); ++i)
    for (size_t t = 0; t < lengths[i]; ++t) m[i][t] = 1.0;
  return m;
}

/// 6 rows x 7 tokens: different lengths, one all-zero row, and a row with a hole (tokens 2-3
/// masked, as observation tokens in a multi-turn response).
Mat ragged_mask() {
  Mat m = prefix_mask({7, 4, 0, 1, 6, 7}, 7);
  m[5][2] = 0.0;
  m[5][3] = 0.0;
  return m;
}


const LossAggMode kAllModes[] = {LossAggMode::kTokenMean, LossAggMode::kSeqMeanTokenSum,
                                 LossAggMode::kSeqMeanTokenMean, LossAggMode::kSeqMeanTokenSumNorm};
const char* mode_name(LossAggMode mode) {
  switch (mode) {
    case LossAggMode::kTokenMean: return "token-mean";
    case LossAggMode::kSeqMeanTokenSum: return "seq-mean-token-sum";
    case LossAggMode::kSeqMeanTokenMean: return "seq-mean-token-mean";
    case LossAggMode::kSeqMeanTokenSumNorm: return "seq-mean-token-sum-norm";
  }
  return "?";
}

// ================================== masked statistics ==================================

TEST(MaskedStats, SumMeanVarWhitenMatchReference) {
  const Mat v = random_mat(6, 7, -3.0, 5.0, 11);
  const Mat m = ragged_mask();
  const auto tv = to_tensor(v), tm = to_tensor(m);
  double sum = 0.0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t t = 0; t < v[i].size(); ++t) sum += v[i][t] * m[i][t];
  expect_close(masked_sum(tv, tm), sum, "masked_sum");
  expect_close(masked_mean(tv, tm), ref_masked_mean(v, m), "masked_mean (all)");
  expect_close(masked_var(tv, tm), ref_masked_var(v, m), "masked_var (unbiased)");
  expect_close(masked_whiten(tv, tm), ref_whiten(v, m), "masked_whiten");
  Mat unshifted = ref_whiten(v, m);
  for (auto& r : unshifted)
    for (auto& x : r) x += ref_masked_mean(v, m);
  expect_close(masked_whiten(tv, tm, /*shift_mean=*/false), unshifted, "masked_whiten shift_mean=false");
  // A bool (or int64) mask counts in float32 as verl's torch does: the epsilon vanishes.
  expect_close(masked_mean(tv, tm.to(torch::kBool)), ref_masked_mean_int(v, m), "masked_mean bool mask");
  expect_close(masked_mean(tv, tm.to(torch::kLong)), ref_masked_mean_int(v, m), "masked_mean int64 mask");
  expect_close(masked_var(tv, tm.to(torch::kLong)), ref_masked_var_int(v, m), "masked_var int64 mask");
}

TEST(MaskedStats, MeanAlongADim) {
  const Mat v = random_mat(6, 7, -1.0, 1.0, 12);
  const Mat m = ragged_mask();
  Vec per_row;
  for (size_t i = 0; i < v.size(); ++i) per_row.push_back(ref_masked_mean({v[i]}, {m[i]}));
  const auto along_rows = masked_mean(to_tensor(v), to_tensor(m), 1);
  expect_close(along_rows, per_row, "masked_mean dim=1");
  expect_close(masked_mean(to_tensor(v), to_tensor(m), -1), per_row, "masked_mean axis=-1");
  EXPECT_EQ(along_rows[2].item<double>(), 0.0);  // the all-masked row: 0 / (0 + 1e-8)
  Vec per_col;
  for (size_t t = 0; t < v[0].size(); ++t) {
    Mat cv(1), cm(1);
    for (size_t i = 0; i < v.size(); ++i) {
      cv[0].push_back(v[i][t]);
      cm[0].push_back(m[i][t]);
    }
    per_col.push_back(ref_masked_mean(cv, cm));
  }
  expect_close(masked_mean(to_tensor(v), to_tensor(m), 0), per_col, "masked_mean dim=0");
}

TEST(MaskedStats, VarHandComputed) {
  // Values {1, 2, 3, 4} selected out of 6: mean 2.5, unbiased var 5/3 (up to verl's 1e-8).
  const auto v = to_tensor(Mat{{1, 2, 9}, {3, 4, -9}});
  const auto m = to_tensor(Mat{{1, 1, 0}, {1, 1, 0}});
  expect_close(masked_var(v, m), 5.0 / (4 + 1e-8) * (4.0 / 3.0), "masked_var hand {1,2,3,4}");
  expect_close(masked_var(v, m, /*unbiased=*/false), 5.0 / (4 + 1e-8), "masked_var biased hand");
}

TEST(MaskedStats, UnbiasedVarThrowsWhenAtMostOneElement) {
  const auto v = to_tensor(Mat{{1.0, 2.0, 3.0}});
  EXPECT_THROW(masked_var(v, to_tensor(Mat{{0.0, 1.0, 0.0}})), std::invalid_argument);
  EXPECT_THROW(masked_var(v, to_tensor(Mat{{0.0, 0.0, 0.0}})), std::invalid_argument);
  EXPECT_THROW(masked_whiten(v, to_tensor(Mat{{1.0, 0.0, 0.0}})), std::invalid_argument);
  EXPECT_NO_THROW(masked_var(v, to_tensor(Mat{{1.0, 1.0, 0.0}})));
  // The biased variance of one element is defined (0), as in verl.
  expect_close(masked_var(v, to_tensor(Mat{{0.0, 1.0, 0.0}}), false), 0.0, "masked_var biased single");
}

TEST(MaskedStats, EntropyFromLogitsMatchesDirectComputation) {
  Mat z = random_mat(5, 11, -4.0, 4.0, 13);
  z[4] = Vec(11, 0.0);
  z[4][3] = 800.0;  // nearly one-hot with huge logits: must stay finite
  z[3] = Vec(11, 1.5);  // uniform: entropy log(11)
  const auto h = entropy_from_logits(to_tensor(z));
  Vec expected;
  for (const auto& r : z) expected.push_back(ref_entropy(r));
  expect_close(h, expected, "entropy_from_logits");
  EXPECT_NEAR(flat_values(h)[3], std::log(11.0), 1e-12);
  // (B, T, V) input reduces the last dim.
  EXPECT_EQ(entropy_from_logits(to_tensor(z).reshape({5, 1, 11})).sizes(), (std::vector<int64_t>{5, 1}));
}

TEST(MaskedStats, LogprobsFromLogits) {
  const Mat z = random_mat(6, 9, -6.0, 6.0, 14);
  const std::vector<int64_t> labels = {0, 8, 3, 3, 5, 1};
  const auto logits = to_tensor(z).reshape({2, 3, 9});
  const auto lab = torch::tensor(labels, torch::kLong).reshape({2, 3});
  Vec expected;
  for (size_t i = 0; i < z.size(); ++i) expected.push_back(z[i][labels[i]] - ref_logsumexp(z[i]));
  const auto lp = logprobs_from_logits(logits, lab);
  EXPECT_EQ(lp.sizes(), (std::vector<int64_t>{2, 3}));
  expect_close(lp, expected, "logprobs_from_logits float64");
  expect_close(logprobs_from_logits(logits.to(torch::kFloat), lab), expected,
               "logprobs_from_logits float32 (tol 1e-5)", 1e-5);
  expect_close(logprobs_from_logits(logits.to(torch::kBFloat16), lab), expected,
               "logprobs_from_logits bfloat16 (tol 0.2)", 0.2);
}

// ================================== advantage estimators ==================================

TEST(Advantages, GaeHandComputed) {
  // γ = λ = 0.5, V = 0.5 everywhere, reward 1 on the last token.
  // Full mask: t=2 δ=0.5 A=0.5; t=1 δ=0.25−0.5=−0.25, A=−0.25+0.25·0.5=−0.125;
  //            t=0 δ=−0.25, A=−0.25+0.25·(−0.125)=−0.28125  → returns A+V.
  // Mask [1,0,1]: t=1 passes A=0.5 and next_value=0.5 through; t=0 sees them: A=−0.125.
  const auto r = to_tensor(Mat{{0, 0, 1}, {0, 0, 1}});
  const auto v = to_tensor(Mat{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}});
  const auto m = to_tensor(Mat{{1, 1, 1}, {1, 0, 1}});
  const auto out = compute_gae_advantage_return(r, v, m, 0.5, 0.5);
  expect_close(out.returns, Mat{{0.21875, 0.375, 1.0}, {0.375, 1.0, 1.0}}, "gae returns (hand)");
}

TEST(Advantages, GaeRaggedMasksMatchReference) {
  const Mat r = random_mat(6, 7, -1.0, 1.0, 21);
  const Mat v = random_mat(6, 7, -2.0, 2.0, 22);
  const Mat m = ragged_mask();
  for (const auto& [gamma, lam] : {std::pair{1.0, 1.0}, std::pair{0.99, 0.95}, std::pair{0.7, 0.3}}) {
    const auto out = compute_gae_advantage_return(to_tensor(r), to_tensor(v), to_tensor(m), gamma, lam);
    const RefAdv ref = ref_gae(r, v, m, gamma, lam);
    const std::string tag = " g=" + std::to_string(gamma) + " l=" + std::to_string(lam);
    expect_close(out.advantages, ref.advantages, "gae advantages" + tag);
    expect_close(out.returns, ref.returns, "gae returns" + tag);
  }
}

TEST(Advantages, GrpoHandComputed) {
  // Group 7 scores {1, 0}: mean 0.5, unbiased std √0.5. Group −3 = {5} alone: mean 0, std 1 as a
  // float32 tensor in verl, so 5 / float32(1 + 1e-6) = 5 / 1.00000095367431640625.
  const auto r = to_tensor(Mat{{0, 1}, {0, 0}, {2, 3}});
  const auto m = to_tensor(Mat{{1, 1}, {1, 1}, {1, 0}});
  const std::vector<int64_t> index = {7, 7, -3};
  const double a = 0.5 / (std::sqrt(0.5) + 1e-6);
  const auto out = compute_grpo_outcome_advantage(r, m, index);
  const double single = 5 / 1.00000095367431640625;
  expect_close(out.advantages, Mat{{a, a}, {-a, -a}, {single, 0}}, "grpo (hand)");
  expect_close(out.returns, Mat{{a, a}, {-a, -a}, {single, 0}}, "grpo returns = advantages");
  const auto dr = compute_grpo_outcome_advantage(r, m, index, 1e-6, /*norm_adv_by_std_in_grpo=*/false);
  expect_close(dr.advantages, Mat{{0.5, 0.5}, {-0.5, -0.5}, {5, 0}}, "dr.grpo (hand)");
}

TEST(Advantages, GrpoGroupsOfDifferentSizesMatchReference) {
  const Mat r = random_mat(6, 7, 0.0, 1.0, 23);
  const Mat m = ragged_mask();
  // Non-contiguous ids; groups of size 3, 2 and 1 interleaved.
  const std::vector<int64_t> index = {1000000007, -5, 1000000007, 42, -5, 1000000007};
  for (const bool norm : {true, false}) {
    for (const double eps : {1e-6, 0.1}) {
      const auto out = compute_grpo_outcome_advantage(to_tensor(r), to_tensor(m), index, eps, norm);
      const Mat ref = ref_grpo(r, m, index, eps, norm);
      const std::string tag = std::string(norm ? "grpo" : "dr.grpo") + " eps=" + std::to_string(eps);
      expect_close(out.advantages, ref, tag);
      expect_close(out.returns, ref, tag + " returns");
    }
  }
}

TEST(Advantages, RlooMatchesHandAndReference) {
  // Group {1, 0, 0}: the leave-one-out baselines are 0, 0.5, 0.5 → A = 1, −0.5, −0.5.
  // A group of one keeps its score.
  const auto hand = compute_rloo_outcome_advantage(to_tensor(Mat{{1}, {0}, {0}, {4}}),
                                                   to_tensor(Mat{{1}, {1}, {1}, {1}}), {3, 3, 3, 9});
  expect_close(hand.advantages, Mat{{1}, {-0.5}, {-0.5}, {4}}, "rloo (hand)");

  const Mat r = random_mat(6, 7, -1.0, 1.0, 24);
  const Mat m = ragged_mask();
  const std::vector<int64_t> index = {2, 8, 2, 8, 2, 77};
  const auto out = compute_rloo_outcome_advantage(to_tensor(r), to_tensor(m), index);
  expect_close(out.advantages, ref_rloo(r, m, index), "rloo");
  expect_close(out.returns, ref_rloo(r, m, index), "rloo returns");
}

TEST(Advantages, ReinforcePlusPlusMatchesReference) {
  // Hand, γ = 0.5, one row r = [1, 2, 4] mask [1, 0, 1]: R2 = 4; R1 = 2 + 0.5·4 = 4, then reset;
  // R0 = 1 + 0.5·0 = 1.
  const auto hand = compute_reinforce_plus_plus_outcome_advantage(to_tensor(Mat{{1, 2, 4}}),
                                                                  to_tensor(Mat{{1, 0, 1}}), 0.5);
  expect_close(hand.returns, Mat{{1, 4, 4}}, "reinforce++ returns (hand)");

  const Mat r = random_mat(6, 7, -1.0, 1.0, 25);
  const Mat m = ragged_mask();
  for (const double gamma : {1.0, 0.9}) {
    const auto out = compute_reinforce_plus_plus_outcome_advantage(to_tensor(r), to_tensor(m), gamma);
    const RefAdv ref = ref_reinforce_pp(r, m, gamma);
    expect_close(out.advantages, ref.advantages, "reinforce++ advantages g=" + std::to_string(gamma));
    expect_close(out.returns, ref.returns, "reinforce++ returns g=" + std::to_string(gamma));
  }
}

TEST(Advantages, ReinforcePlusPlusBaselineMatchesReference) {
  const Mat r = random_mat(6, 7, -1.0, 1.0, 26);
  const Mat m = ragged_mask();
  const std::vector<int64_t> index = {5, 5, 6, 6, 6, 99};
  const auto out = compute_reinforce_plus_plus_baseline_outcome_advantage(to_tensor(r), to_tensor(m), index);
  const Mat ref = ref_reinforce_pp_baseline(r, m, index);
  expect_close(out.advantages, ref, "reinforce++-baseline");
  expect_close(out.returns, ref, "reinforce++-baseline returns");
}

TEST(Advantages, RemaxMatchesReference) {
  // Hand: r = [1, 2, 3] mask [1, 1, 0], baseline 2 → returns [3, 2, 0], A = [1, 0, 0].
  const auto hand = compute_remax_outcome_advantage(to_tensor(Mat{{1, 2, 3}}), to_tensor(Vec{2.0}),
                                                    to_tensor(Mat{{1, 1, 0}}));
  expect_close(hand.returns, Mat{{3, 2, 0}}, "remax returns (hand)");
  expect_close(hand.advantages, Mat{{1, 0, 0}}, "remax advantages (hand)");

  const Mat r = random_mat(6, 7, -1.0, 1.0, 27);
  const Mat m = ragged_mask();
  const Vec b = {0.3, -0.2, 1.0, 0.0, 2.5, -1.0};
  const auto out = compute_remax_outcome_advantage(to_tensor(r), to_tensor(b), to_tensor(m));
  const RefAdv ref = ref_remax(r, b, m);
  expect_close(out.advantages, ref.advantages, "remax advantages");
  expect_close(out.returns, ref.returns, "remax returns");
}

TEST(Advantages, RunWithoutAutogradAndKeepDtype) {
  const Mat m = ragged_mask();
  const auto r = to_tensor(random_mat(6, 7, -1.0, 1.0, 28)).requires_grad_(true);
  const auto v = to_tensor(random_mat(6, 7, -1.0, 1.0, 29)).requires_grad_(true);
  const std::vector<int64_t> index = {0, 0, 1, 1, 2, 2};
  const auto gae = compute_gae_advantage_return(r, v, to_tensor(m), 1.0, 0.95);
  EXPECT_FALSE(gae.advantages.requires_grad());
  EXPECT_FALSE(gae.returns.requires_grad());
  EXPECT_FALSE(compute_grpo_outcome_advantage(r, to_tensor(m), index).advantages.requires_grad());

  // float32 in, float32 out, agreeing with the float64 reference to float32 precision.
  const Mat r64 = random_mat(6, 7, -1.0, 1.0, 30), v64 = random_mat(6, 7, -1.0, 1.0, 31);
  const auto gae32 = compute_gae_advantage_return(to_tensor(r64).to(torch::kFloat), to_tensor(v64).to(torch::kFloat),
                                                  to_tensor(m).to(torch::kFloat), 0.99, 0.95);
  EXPECT_EQ(gae32.advantages.scalar_type(), torch::kFloat);
  const RefAdv ref = ref_gae(r64, v64, m, 0.99, 0.95);
  expect_close(gae32.advantages, ref.advantages, "gae float32 (tol 1e-5)", 1e-5);
  const auto grpo32 = compute_grpo_outcome_advantage(to_tensor(r64).to(torch::kFloat),
                                                     to_tensor(m).to(torch::kBool), index);
  EXPECT_EQ(grpo32.advantages.scalar_type(), torch::kFloat);
  expect_close(grpo32.advantages, ref_grpo(r64, m, index, 1e-6, true), "grpo float32 bool mask (tol 1e-5)", 1e-5);
}

TEST(Advantages, IndexSizeMismatchIsRejected) {
  const auto r = to_tensor(Mat{{1, 2}, {3, 4}});
  EXPECT_THROW(compute_grpo_outcome_advantage(r, torch::ones_like(r), {1}), c10::Error);
}

// ================================== losses ==================================

TEST(Losses, AggLossHandComputedWithAllMaskedRow) {
  // Row sums of the valid tokens: 1+2 = 3, 4, and an all-masked row.
  const auto l = to_tensor(Mat{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
  const auto m = to_tensor(Mat{{1, 1, 0}, {1, 0, 0}, {0, 0, 0}});
  // verl: token-mean divides by the plain count, seq-mean-token-mean each row by (count + 1e-8).
  expect_close(agg_loss(l, m, LossAggMode::kTokenMean), 7.0 / 3.0, "agg token-mean (hand)");
  expect_close(agg_loss(l, m, LossAggMode::kSeqMeanTokenSum), (3.0 + 4.0) / 2, "agg seq-mean-token-sum (hand)");
  expect_close(agg_loss(l, m, LossAggMode::kSeqMeanTokenMean), (3.0 / (2 + 1e-8) + 4.0 / (1 + 1e-8)) / 2,
               "agg seq-mean-token-mean (hand)");
  expect_close(agg_loss(l, m, LossAggMode::kSeqMeanTokenSumNorm), 7.0 / 3, "agg seq-mean-token-sum-norm L=3");
  GlobalBatchInfo norm10;
  norm10.loss_scale_factor = 10;
  expect_close(agg_loss(l, m, LossAggMode::kSeqMeanTokenSumNorm, norm10), 0.7, "agg seq-mean-token-sum-norm L=10");
  // Nothing valid at all: 0, not NaN.
  for (const auto mode : kAllModes)
    expect_close(agg_loss(l, torch::zeros_like(m), mode), 0.0, std::string("agg empty ") + mode_name(mode));
}

TEST(Losses, AggLossMatchesReference) {
  const Mat l = random_mat(6, 7, -2.0, 3.0, 41);
  const Mat m = ragged_mask();
  for (const auto mode : kAllModes)
    expect_close(agg_loss(to_tensor(l), to_tensor(m), mode), ref_agg(l, m, mode),
                 std::string("agg ") + mode_name(mode));
}

struct PolicyCase {
  Mat old_lp, lp, adv, m;
};
PolicyCase policy_case() {
  PolicyCase c;
  c.m = ragged_mask();
  c.old_lp = random_mat(6, 7, -3.0, -0.1, 51);
  const Mat delta = random_mat(6, 7, -1.0, 1.0, 52);  // ratios in [e^-1, e^1]: all clip branches
  c.adv = random_mat(6, 7, -2.0, 2.0, 53);
  c.lp = c.old_lp;
  for (size_t i = 0; i < c.lp.size(); ++i)
    for (size_t t = 0; t < c.lp[i].size(); ++t) c.lp[i][t] += delta[i][t];
  c.lp[0][1] = c.old_lp[0][1] + 25.0;  // Δ clamped to 20
  c.adv[0][1] = 1.0;
  c.lp[1][0] = c.old_lp[1][0] + 30.0;  // Δ clamped, A < 0: dual clip takes −A·c
  c.adv[1][0] = -0.5;
  c.lp[4][2] = c.old_lp[4][2] - 30.0;  // Δ clamped to −20
  return c;
}

TEST(Losses, PolicyLossHandComputed) {
  // A = 1, ρ = 1.5: L1 = −1.5, L2 = −1.2 → −1.2, counted in pg_clipfrac (L2 > L1).
  // A = −1, ρ = 4: L1 = 4, L2 = 1.2 → Lc = 4 (L2 < L1: not in pg_clipfrac); Lc > L3 = 3 → 3,
  // counted in pg_clipfrac_lower. Token-mean of {−1.2, 3} = 0.9.
  const auto old_lp = to_tensor(Mat{{0.0, 0.0}});
  const auto lp = to_tensor(Mat{{std::log(1.5), std::log(4.0)}});
  const auto out = compute_policy_loss(old_lp, lp, to_tensor(Mat{{1.0, -1.0}}), to_tensor(Mat{{1.0, 1.0}}),
                                       0.2, 0.2, 3.0, LossAggMode::kTokenMean);
  expect_close(out.pg_loss, 1.8 / 2, "pg_loss (hand, token-mean: no epsilon)");
  expect_close(out.pg_clipfrac, 1.0 / (2 + 1e-8), "pg_clipfrac (hand)");
  expect_close(out.pg_clipfrac_lower, 1.0 / (2 + 1e-8), "pg_clipfrac_lower (hand)");
  expect_close(out.ppo_kl, -(std::log(1.5) + std::log(4.0)) / (2 + 1e-8), "ppo_kl (hand)");
  EXPECT_THROW(compute_policy_loss(old_lp, lp, lp, lp, 0.2, 0.2, 1.0, LossAggMode::kTokenMean),
               std::invalid_argument);
}

TEST(Losses, PolicyLossDualClipEveryModeMatchesReference) {
  const PolicyCase c = policy_case();
  for (const auto mode : kAllModes) {
    for (const auto& [lo, hi] : {std::pair{0.2, 0.2}, std::pair{0.2, 0.28}}) {
      const auto out = compute_policy_loss(to_tensor(c.old_lp), to_tensor(c.lp), to_tensor(c.adv),
                                           to_tensor(c.m), lo, hi, 3.0, mode);
      const RefPolicy ref = ref_policy(c.old_lp, c.lp, c.adv, c.m, lo, hi, 3.0, mode);
      const std::string tag = std::string(" ") + mode_name(mode) + " hi=" + std::to_string(hi);
      expect_close(out.pg_loss, ref.loss, "pg_loss" + tag);
      expect_close(out.pg_clipfrac, ref.clipfrac, "pg_clipfrac" + tag);
      expect_close(out.ppo_kl, ref.ppo_kl, "ppo_kl" + tag);
      expect_close(out.pg_clipfrac_lower, ref.clipfrac_lower, "pg_clipfrac_lower" + tag);
      // The case exercises both clips, so these metrics are informative, not trivially 0.
      EXPECT_GT(ref.clipfrac_lower, 0.0);
      EXPECT_GT(ref.clipfrac, 0.0);
      EXPECT_LT(ref.clipfrac, 1.0);
    }
  }
}

TEST(Losses, PolicyLossGradientWrtLogProb) {
  const PolicyCase c = policy_case();
  const auto lp = to_tensor(c.lp).requires_grad_(true);
  const auto out = compute_policy_loss(to_tensor(c.old_lp), lp, to_tensor(c.adv), to_tensor(c.m), 0.2, 0.28,
                                       3.0, LossAggMode::kTokenMean);
  ASSERT_TRUE(out.pg_loss.requires_grad());
  out.pg_loss.backward();

  // Analytic: token-mean weights each valid token by 1/(Σm + 1e-8).
  const RefPolicy ref = ref_policy(c.old_lp, c.lp, c.adv, c.m, 0.2, 0.28, 3.0, LossAggMode::kTokenMean);
  double n = 0.0;
  for (const auto& r : c.m)
    for (double x : r) n += x;
  Mat grad = ref.dloss_dlogp;
  size_t nonzero = 0;
  for (size_t i = 0; i < grad.size(); ++i)
    for (size_t t = 0; t < grad[i].size(); ++t) {
      grad[i][t] *= c.m[i][t] / (n + 1e-8);
      nonzero += grad[i][t] != 0.0;
    }
  EXPECT_GT(nonzero, 5u);
  expect_close(lp.grad(), grad, "d pg_loss / d log_prob (analytic)");

  // Central finite differences of the loss itself, on a few tokens of each kind.
  const double h = 1e-6;
  const std::pair<size_t, size_t> probes[] = {{0, 0}, {0, 1}, {1, 0}, {3, 0}, {5, 6}, {2, 3}};
  for (const auto& probe : probes) {
    const size_t i = probe.first, t = probe.second;
    auto loss_at = [&](double shift) {
      Mat moved = c.lp;
      moved[i][t] += shift;
      return compute_policy_loss(to_tensor(c.old_lp), to_tensor(moved), to_tensor(c.adv), to_tensor(c.m), 0.2,
                                 0.28, 3.0, LossAggMode::kTokenMean)
          .pg_loss.item<double>();
    };
    const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
    expect_close(lp.grad()[static_cast<int64_t>(i)][static_cast<int64_t>(t)], fd,
                 "d pg_loss / d log_prob[" + std::to_string(i) + "," + std::to_string(t) + "] vs FD (tol 1e-8)",
                 1e-8);
  }
}

TEST(Losses, ValueLossWithClippingMatchesReference) {
  const Mat m = ragged_mask();
  const Mat values = random_mat(6, 7, -1.0, 1.0, 61);
  const Mat returns = random_mat(6, 7, -2.0, 2.0, 62);
  const Mat step = random_mat(6, 7, -1.5, 1.5, 63);  // |v − V_old| beyond 0.5 in many places
  Mat vpreds = values;
  for (size_t i = 0; i < vpreds.size(); ++i)
    for (size_t t = 0; t < vpreds[i].size(); ++t) vpreds[i][t] += step[i][t];

  Mat loss = values, clipped = values;
  for (size_t i = 0; i < vpreds.size(); ++i)
    for (size_t t = 0; t < vpreds[i].size(); ++t) {
      const double vc = std::min(values[i][t] + 0.5, std::max(values[i][t] - 0.5, vpreds[i][t]));
      const double e1 = (vpreds[i][t] - returns[i][t]) * (vpreds[i][t] - returns[i][t]);
      const double e2 = (vc - returns[i][t]) * (vc - returns[i][t]);
      loss[i][t] = std::max(e1, e2);
      clipped[i][t] = e2 > e1 ? 1.0 : 0.0;
    }
  const double clipfrac = ref_masked_mean(clipped, m);
  EXPECT_GT(clipfrac, 0.0);
  EXPECT_LT(clipfrac, 1.0);
  for (const auto mode : kAllModes) {
    const auto out = compute_value_loss(to_tensor(vpreds), to_tensor(returns), to_tensor(values), to_tensor(m),
                                        0.5, mode);
    expect_close(out.vf_loss, 0.5 * ref_agg(loss, m, mode), std::string("vf_loss ") + mode_name(mode));
    expect_close(out.vf_clipfrac, clipfrac, std::string("vf_clipfrac ") + mode_name(mode));
  }
  // Hand: V_old = 0, R = 2, v = 1 → clipped to 0.5: max(1, 2.25)·0.5 = 1.125, clipped.
  const auto hand = compute_value_loss(to_tensor(Mat{{1.0}}), to_tensor(Mat{{2.0}}), to_tensor(Mat{{0.0}}),
                                       to_tensor(Mat{{1.0}}), 0.5, LossAggMode::kTokenMean);
  expect_close(hand.vf_loss, 0.5 * 2.25, "vf_loss (hand, token-mean: no epsilon)");
  expect_close(hand.vf_clipfrac, 1.0 / (1 + 1e-8), "vf_clipfrac (hand)");
}

TEST(Losses, EntropyLossMatchesReference) {
  const Mat m = ragged_mask();
  const Mat z = random_mat(6 * 7, 5, -3.0, 3.0, 71);
  const auto logits = to_tensor(z).reshape({6, 7, 5}).requires_grad_(true);
  Mat h(6, Vec(7));
  for (size_t i = 0; i < 6; ++i)
    for (size_t t = 0; t < 7; ++t) h[i][t] = ref_entropy(z[i * 7 + t]);
  for (const auto mode : kAllModes)
    expect_close(compute_entropy_loss(logits, to_tensor(m), mode), ref_agg(h, m, mode),
                 std::string("entropy loss ") + mode_name(mode));
  EXPECT_TRUE(compute_entropy_loss(logits, to_tensor(m), LossAggMode::kTokenMean).requires_grad());
}

// ================================== KL ==================================

TEST(Kl, EachEstimatorMatchesReference) {
  // Hand: logp = −1, ref = −2 → k1 1, abs 1, mse 0.5, k3 with x = −1: e^−1 + 1 − 1 = e^−1.
  const auto a = to_tensor(Mat{{-1.0}}), b = to_tensor(Mat{{-2.0}});
  expect_close(kl_penalty(a, b, KlPenalty::kKl), 1.0, "kl k1 (hand)");
  expect_close(kl_penalty(a, b, KlPenalty::kAbs), 1.0, "kl abs (hand)");
  expect_close(kl_penalty(a, b, KlPenalty::kMse), 0.5, "kl mse (hand)");
  expect_close(kl_penalty(a, b, KlPenalty::kLowVarKl), std::exp(-1.0), "kl low_var_kl (hand)");

  Mat logp = random_mat(4, 6, -4.0, 0.0, 81);
  Mat ref = random_mat(4, 6, -4.0, 0.0, 82);
  ref[0][0] = logp[0][0] + 25.0;  // x clamped to 20, value clamped to 10
  ref[0][1] = logp[0][1] - 25.0;  // x clamped to −20, value e^−20 + 19 → clamped to 10
  ref[0][2] = logp[0][2] + 2.5;   // e^2.5 − 3.5 ≈ 8.68: inside the clamp
  for (const auto kind : {KlPenalty::kKl, KlPenalty::kAbs, KlPenalty::kMse, KlPenalty::kLowVarKl}) {
    Mat expected = logp;
    for (size_t i = 0; i < logp.size(); ++i)
      for (size_t t = 0; t < logp[i].size(); ++t) expected[i][t] = ref_kl(logp[i][t], ref[i][t], kind);
    expect_close(kl_penalty(to_tensor(logp), to_tensor(ref), kind), expected,
                 "kl_penalty kind " + std::to_string(static_cast<int>(kind)));
  }
  const auto k3 = flat_values(kl_penalty(to_tensor(logp), to_tensor(ref), KlPenalty::kLowVarKl));
  EXPECT_EQ(k3[0], 10.0);
  EXPECT_EQ(k3[1], 10.0);
  EXPECT_NEAR(k3[2], std::exp(2.5) - 3.5, 1e-12);
}

TEST(Kl, FixedAndAdaptiveControllers) {
  FixedKlController fixed(0.05);
  fixed.update(123.0, 64);
  EXPECT_EQ(fixed.value(), 0.05);

  // β ← β·(1 + clip(kl/target − 1, ±0.2)·n/horizon), target 0.1, horizon 1000.
  AdaptiveKlController ctl(0.2, 0.1, 1000);
  ctl.update(0.15, 64);  // error 0.5 → clipped 0.2
  double beta = 0.2 * (1 + 0.2 * 64 / 1000.0);
  EXPECT_NEAR(ctl.value(), beta, 1e-15);
  ctl.update(0.11, 100);  // error 0.1, inside the clip
  beta *= 1 + (0.11 / 0.1 - 1) * 100 / 1000.0;
  EXPECT_NEAR(ctl.value(), beta, 1e-15);
  ctl.update(0.0, 500);  // error −1 → clipped −0.2
  beta *= 1 - 0.2 * 500 / 1000.0;
  EXPECT_NEAR(ctl.value(), beta, 1e-15);
  ctl.set_value(0.3);
  EXPECT_EQ(ctl.value(), 0.3);

  KlCtrlConfig cfg;
  cfg.type = KlCtrlType::kAdaptive;
  cfg.kl_coef = 0.01;
  cfg.target_kl = 0.5;
  cfg.horizon = 10;
  auto made = make_kl_controller(cfg);
  made->update(1.0, 5);  // error 1 → 0.2; 1 + 0.2·5/10 = 1.1
  EXPECT_NEAR(made->value(), 0.011, 1e-15);
  cfg.type = KlCtrlType::kFixed;
  auto fixed_made = make_kl_controller(cfg);
  fixed_made->update(1.0, 5);
  EXPECT_EQ(fixed_made->value(), 0.01);
  cfg.type = KlCtrlType::kAdaptive;
  cfg.horizon = 0;
  EXPECT_THROW(make_kl_controller(cfg), ConfigError);
}

TEST(Kl, ApplyKlPenaltyInReward) {
  const Mat m = ragged_mask();  // includes an all-masked row, which counts as KL 0 in the batch mean
  const Mat scores = random_mat(6, 7, 0.0, 1.0, 91);
  const Mat old_lp = random_mat(6, 7, -3.0, -0.1, 92);
  const Mat ref_lp = random_mat(6, 7, -3.0, -0.1, 93);
  for (const auto kind : {KlPenalty::kKl, KlPenalty::kLowVarKl}) {
    AdaptiveKlController ctl(0.1, 0.05, 200);
    Mat rewards = scores;
    double kl_sum = 0.0;
    for (size_t i = 0; i < m.size(); ++i) {
      double s = 0.0, n = 0.0;
      for (size_t t = 0; t < m[i].size(); ++t) {
        const double kld = ref_kl(old_lp[i][t], ref_lp[i][t], kind) * m[i][t];
        rewards[i][t] = scores[i][t] - 0.1 * kld;
        s += kld * m[i][t];
        n += m[i][t];
      }
      kl_sum += s / (n + 1e-8);
    }
    const double current_kl = kl_sum / static_cast<double>(m.size());
    const auto out = apply_kl_penalty(to_tensor(scores), to_tensor(old_lp), to_tensor(ref_lp), to_tensor(m), ctl,
                                      kind);
    const std::string tag = " kind " + std::to_string(static_cast<int>(kind));
    expect_close(out.token_level_rewards, rewards, "apply_kl_penalty rewards" + tag);
    EXPECT_NEAR(out.current_kl, current_kl, kTol);
    // The controller saw current_kl and n_steps = batch size (6).
    const double err = std::clamp(current_kl / 0.05 - 1, -0.2, 0.2);
    EXPECT_NEAR(ctl.value(), 0.1 * (1 + err * 6 / 200.0), 1e-15);
    EXPECT_NE(ctl.value(), 0.1);
  }
}

}  // namespace
}  // namespace hs::trainer
