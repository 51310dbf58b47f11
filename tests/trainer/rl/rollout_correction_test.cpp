// rollout_correction_test.cpp — the rollout/training mismatch metrics and verl's rollout correction
// (IS weights, rejection, veto) against a torch re-implementation of verl's rollout_corr_helper.py
// and ray_trainer's training/rollout_probs_diff_* on fixed inputs. The tables below are printed by
//   /root/.local/share/hybridscope/venv/bin/python tests/trainer/rl/rollout_correction_reference.py
// (float32 inputs as verl's log-probs are; a relative tolerance of 1e-6 covers reduction order).
#include "hybridscope/trainer/rl/rollout_correction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace hs::trainer {
namespace {

// The script's inputs: 4 responses of up to 5 tokens, float32.
struct Inputs {
  torch::Tensor old_log_prob, rollout_log_prob, mask;
};
Inputs inputs() {
  const auto f = torch::TensorOptions().dtype(torch::kFloat32);
  return {torch::tensor({-0.10, -1.20, -0.70, -2.00, -0.05, -0.30, -0.25, -3.00, -0.90, -1.10,
                         -2.50, -0.02, -0.60, -0.40, -0.80, -0.05, -0.07, -1.50, -0.20, -0.30}, f).view({4, 5}),
          torch::tensor({-0.12, -1.00, -0.75, -2.60, -0.04, -0.28, -0.40, -2.20, -0.95, -1.00,
                         -2.40, -0.03, -0.62, -0.10, -0.85, -0.06, -0.05, -9.00, -0.22, -0.31}, f).view({4, 5}),
          torch::tensor({1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1}, f).view({4, 5})};
}

const std::vector<std::pair<std::string, double>> kMismatch = {
    {"training/rollout_probs_diff_max", 0.22300675511360168},
    {"training/rollout_probs_diff_mean", 0.043903667479753494},
    {"training/rollout_probs_diff_std", 0.05552144721150398},
    {"training/rollout_actor_probs_pearson_corr", 0.9797442221905348},
    {"rollout_corr/training_ppl", 2.701530933380127},
    {"rollout_corr/training_log_ppl", 0.9485000371932983},
    {"rollout_corr/kl", -0.44875001907348633},
    {"rollout_corr/k3_kl", 112.50360107421875},
    {"rollout_corr/rollout_ppl", 3.982663631439209},
    {"rollout_corr/rollout_log_ppl", 1.3066250085830688},
    {"rollout_corr/log_ppl_diff", -0.3581250011920929},
    {"rollout_corr/log_ppl_abs_diff", 0.45262500643730164},
    {"rollout_corr/log_ppl_diff_max", 0.14400005340576172},
    {"rollout_corr/log_ppl_diff_min", -1.5040000677108765},
    {"rollout_corr/ppl_ratio", 0.8280730247497559},
    {"rollout_corr/chi2_token", 204313.609375},
    {"rollout_corr/chi2_seq", 850607.0},
};
const std::vector<std::pair<std::string, double>> kTokenIsTokenRsVeto = {
    {"rollout_corr/rollout_is_mean", 113.95233917236328},
    {"rollout_corr/rollout_is_ratio_fraction_high", 0.0625},
    {"rollout_corr/rollout_is_ratio_fraction_low", 0.0625},
    {"rollout_corr/rollout_is_max", 1808.0423583984375},
    {"rollout_corr/rollout_is_min", 0.4493289887905121},
    {"rollout_corr/rollout_is_std", 0.34579551219940186},
    {"rollout_corr/rollout_is_eff_sample_size", 0.90668216748777},
    {"rollout_corr/rollout_is_seq_mean", 91.36438751220703},
    {"rollout_corr/rollout_is_seq_std", 180.6988067626953},
    {"rollout_corr/rollout_is_seq_max", 362.41253662109375},
    {"rollout_corr/rollout_is_seq_min", 0.9094940423965454},
    {"rollout_corr/rollout_is_seq_max_deviation", 361.41253662109375},
    {"rollout_corr/rollout_is_seq_fraction_high", 0.25},
    {"rollout_corr/rollout_is_seq_fraction_low", 0.0},
    {"rollout_corr/rollout_rs_mean", 113.95233917236328},
    {"rollout_corr/rollout_rs_ratio_fraction_high", 0.125},
    {"rollout_corr/rollout_rs_ratio_fraction_low", 0.0625},
    {"rollout_corr/rollout_rs_max", 1808.0423583984375},
    {"rollout_corr/rollout_rs_min", 0.4493289887905121},
    {"rollout_corr/rollout_rs_std", 0.20519056916236877},
    {"rollout_corr/rollout_rs_eff_sample_size", 0.9623158147114208},
    {"rollout_corr/rollout_rs_seq_mean", 91.36438751220703},
    {"rollout_corr/rollout_rs_seq_std", 180.6988067626953},
    {"rollout_corr/rollout_rs_seq_max", 362.41253662109375},
    {"rollout_corr/rollout_rs_seq_min", 0.9094940423965454},
    {"rollout_corr/rollout_rs_seq_max_deviation", 361.41253662109375},
    {"rollout_corr/rollout_rs_seq_fraction_high", 0.25},
    {"rollout_corr/rollout_rs_seq_fraction_low", 0.0},
    {"rollout_corr/rollout_rs_masked_fraction", 0.1875},
    {"rollout_corr/rollout_rs_seq_masked_fraction", 0.75},
    {"rollout_corr/rollout_is_veto_fraction", 0.25},
    {"rollout_corr/rollout_is_catastrophic_token_fraction", 0.0625},
};
const std::vector<double> kTokenIsTokenRsVetoWeights = {1.020201325416565, 0.8187307119369507, 1.0512710809707642, 1.8221186399459839, 0.0, 0.9801986813545227, 1.1618342399597168, 0.4493289887905121, 1.0512710809707642, 0.9048373699188232, 0.9048374891281128, 1.0100501775741577, 0.0, 0.0, 0.0, 1.0100501775741577, 0.9801986813545227, 2.0, 1.020201325416565, 1.0100501775741577};
const std::vector<double> kTokenIsTokenRsVetoMask = {1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0};
const std::vector<std::pair<std::string, double>> kSequenceIsNormalizedGeometricRs = {
    {"rollout_corr/rollout_is_max", 1844.5672607421875},
    {"rollout_corr/rollout_is_min", 0.4867522716522217},
    {"rollout_corr/rollout_is_mean", 577.0936889648438},
    {"rollout_corr/rollout_is_ratio_fraction_high", 0.25},
    {"rollout_corr/rollout_is_ratio_fraction_low", 0.25},
    {"rollout_corr/rollout_is_std", 0.6278811693191528},
    {"rollout_corr/rollout_is_eff_sample_size", 0.8097807630192169},
    {"rollout_corr/rollout_is_seq_mean", 461.8919677734375},
    {"rollout_corr/rollout_is_seq_std", 921.7835693359375},
    {"rollout_corr/rollout_is_seq_max", 1844.567138671875},
    {"rollout_corr/rollout_is_seq_min", 0.4867522716522217},
    {"rollout_corr/rollout_is_seq_max_deviation", 1843.567138671875},
    {"rollout_corr/rollout_is_seq_fraction_high", 0.25},
    {"rollout_corr/rollout_is_seq_fraction_low", 0.25},
    {"rollout_corr/rollout_is_batch_norm_factor", 1.2501693964004517},
    {"rollout_corr/rollout_rs_max", 4.4996514320373535},
    {"rollout_corr/rollout_rs_min", 0.8658877611160278},
    {"rollout_corr/rollout_rs_mean", 2.0774011611938477},
    {"rollout_corr/rollout_rs_ratio_fraction_high", 0.25},
    {"rollout_corr/rollout_rs_ratio_fraction_low", 0.25},
    {"rollout_corr/rollout_rs_std", 0.2503542900085449},
    {"rollout_corr/rollout_rs_eff_sample_size", 0.9548018110326023},
    {"rollout_corr/rollout_rs_seq_mean", 1.8615546226501465},
    {"rollout_corr/rollout_rs_seq_std", 1.7619991302490234},
    {"rollout_corr/rollout_rs_seq_max", 4.4996514320373535},
    {"rollout_corr/rollout_rs_seq_min", 0.8658877611160278},
    {"rollout_corr/rollout_rs_seq_max_deviation", 3.4996514320373535},
    {"rollout_corr/rollout_rs_seq_fraction_high", 0.25},
    {"rollout_corr/rollout_rs_seq_fraction_low", 0.25},
    {"rollout_corr/rollout_rs_masked_fraction", 0.625},
    {"rollout_corr/rollout_rs_seq_masked_fraction", 0.5},
    {"rollout_corr/rollout_is_veto_fraction", 0.0},
    {"rollout_corr/rollout_is_catastrophic_token_fraction", 0.0},
};
const std::vector<double> kSequenceIsNormalizedGeometricRsWeights = {1.279821753501892, 1.279821753501892, 1.279821753501892, 1.279821753501892, 0.0, 0.3893490433692932, 0.3893490433692932, 0.3893490433692932, 0.3893490433692932, 0.3893490433692932, 0.7310459017753601, 0.7310459017753601, 0.0, 0.0, 0.0, 1.599783182144165, 1.599783182144165, 1.599783182144165, 1.599783182144165, 1.599783182144165};
const std::vector<double> kSequenceIsNormalizedGeometricRsMask = {1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
const std::vector<std::pair<std::string, double>> kSequenceRs = {
    {"rollout_corr/rollout_rs_max", 1844.5672607421875},
    {"rollout_corr/rollout_rs_min", 0.4867522716522217},
    {"rollout_corr/rollout_rs_mean", 577.0936889648438},
    {"rollout_corr/rollout_rs_ratio_fraction_high", 0.25},
    {"rollout_corr/rollout_rs_ratio_fraction_low", 0.25},
    {"rollout_corr/rollout_rs_std", 0.6278811693191528},
    {"rollout_corr/rollout_rs_eff_sample_size", 0.8097807630192169},
    {"rollout_corr/rollout_rs_seq_mean", 461.8919677734375},
    {"rollout_corr/rollout_rs_seq_std", 921.7835693359375},
    {"rollout_corr/rollout_rs_seq_max", 1844.567138671875},
    {"rollout_corr/rollout_rs_seq_min", 0.4867522716522217},
    {"rollout_corr/rollout_rs_seq_max_deviation", 1843.567138671875},
    {"rollout_corr/rollout_rs_seq_fraction_high", 0.25},
    {"rollout_corr/rollout_rs_seq_fraction_low", 0.25},
    {"rollout_corr/rollout_rs_masked_fraction", 0.625},
    {"rollout_corr/rollout_rs_seq_masked_fraction", 0.5},
    {"rollout_corr/rollout_is_veto_fraction", 0.0},
    {"rollout_corr/rollout_is_catastrophic_token_fraction", 0.0},
};
const std::vector<double> kSequenceRsMask = {1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};

void expect_metrics(const Metrics& got, const std::vector<std::pair<std::string, double>>& want, const char* what) {
  std::map<std::string, double> by_name(got.begin(), got.end());
  EXPECT_EQ(by_name.size(), want.size()) << what << ": the same metric names as verl's";
  for (const auto& [name, value] : want) {
    const auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end()) << what << ": missing " << name;
    EXPECT_NEAR(it->second, value, 1e-6 * std::max(1.0, std::abs(value))) << what << ": " << name;
  }
}

void expect_tensor(const torch::Tensor& got, const std::vector<double>& want, const char* what) {
  ASSERT_TRUE(got.defined()) << what;
  const auto flat = got.to(torch::kDouble).contiguous().view({-1});
  ASSERT_EQ(flat.numel(), static_cast<std::int64_t>(want.size())) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(flat[static_cast<std::int64_t>(i)].item<double>(), want[i], 1e-6 * std::max(1.0, std::abs(want[i])))
        << what << " [" << i << "]";
}

TEST(RolloutCorrection, MismatchMetricsMatchVerls) {
  const Inputs in = inputs();
  expect_metrics(rollout_mismatch_metrics(in.old_log_prob, in.rollout_log_prob, in.mask), kMismatch, "mismatch");
}

TEST(RolloutCorrection, TokenIsWithTokenRejectionAndVeto) {
  const Inputs in = inputs();
  RolloutCorrectionConfig c;
  c.rollout_is = RolloutCorrectionLevel::kToken;
  c.rollout_is_threshold = 2.0;
  c.rollout_rs = RolloutCorrectionLevel::kToken;
  c.rollout_rs_threshold = 1.5;
  c.rollout_token_veto_threshold = 0.5;  // row 1 has a token at exp(-0.8) < 0.5: vetoed
  const RolloutCorrection r = compute_rollout_correction(in.old_log_prob, in.rollout_log_prob, in.mask, c);
  expect_metrics(r.metrics, kTokenIsTokenRsVeto, "token IS + token RS + veto");
  expect_tensor(r.is_weights, kTokenIsTokenRsVetoWeights, "weights (truncated at 2, 0 on padding)");
  expect_tensor(r.response_mask, kTokenIsTokenRsVetoMask, "mask");
}

TEST(RolloutCorrection, SequenceIsNormalizedWithGeometricRejection) {
  const Inputs in = inputs();
  RolloutCorrectionConfig c;
  c.rollout_is = RolloutCorrectionLevel::kSequence;
  c.rollout_is_batch_normalize = true;
  c.rollout_rs = RolloutCorrectionLevel::kGeometric;
  c.rollout_rs_threshold = 1.5;
  c.rollout_rs_threshold_lower = 0.9;
  const RolloutCorrection r = compute_rollout_correction(in.old_log_prob, in.rollout_log_prob, in.mask, c);
  expect_metrics(r.metrics, kSequenceIsNormalizedGeometricRs, "sequence IS + geometric RS");
  expect_tensor(r.is_weights, kSequenceIsNormalizedGeometricRsWeights, "weights");
  expect_tensor(r.response_mask, kSequenceIsNormalizedGeometricRsMask, "mask");
}

TEST(RolloutCorrection, SequenceRejectionAloneLeavesNoWeights) {
  const Inputs in = inputs();
  RolloutCorrectionConfig c;
  c.rollout_rs = RolloutCorrectionLevel::kSequence;
  c.rollout_rs_threshold = 2.0;
  const RolloutCorrection r = compute_rollout_correction(in.old_log_prob, in.rollout_log_prob, in.mask, c);
  EXPECT_FALSE(r.is_weights.defined());
  expect_metrics(r.metrics, kSequenceRs, "sequence RS");
  expect_tensor(r.response_mask, kSequenceRsMask, "mask");
}

TEST(RolloutCorrection, AMaskWithoutTokensIsRefused) {
  const Inputs in = inputs();
  EXPECT_THROW(rollout_mismatch_metrics(in.old_log_prob, in.rollout_log_prob, torch::zeros_like(in.mask)),
               std::invalid_argument);
  EXPECT_THROW(compute_rollout_correction(in.old_log_prob, in.rollout_log_prob.narrow(1, 0, 4), in.mask, {}),
               std::invalid_argument);
}

}  // namespace
}  // namespace hs::trainer
