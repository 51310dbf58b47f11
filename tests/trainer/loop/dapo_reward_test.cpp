// dapo_reward_test.cpp — verl's DAPO overlong reward shaping by hand, and the config refusals of
// the DAPO and rollout-correction keys (each names the key and the fix).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/loop/rollout_phase.h"

namespace hs::trainer {
namespace {

// max_response_length 10, buffer 4: expected length 6; penalty −(length − 6)/4 · factor, at most 0.
TEST(DapoReward, OverlongPenaltyGrowsLinearlyOverTheBuffer) {
  OverlongBufferConfig buffer;
  buffer.enable = true;
  buffer.len = 4;
  buffer.penalty_factor = 1.0;
  EXPECT_DOUBLE_EQ(overlong_penalty(buffer, 3, 10), 0.0);    // shorter than expected: no bonus either
  EXPECT_DOUBLE_EQ(overlong_penalty(buffer, 6, 10), 0.0);
  EXPECT_DOUBLE_EQ(overlong_penalty(buffer, 8, 10), -0.5);   // −(8 − 6)/4
  EXPECT_DOUBLE_EQ(overlong_penalty(buffer, 10, 10), -1.0);  // at max_response_length: −factor
  buffer.penalty_factor = 0.5;
  EXPECT_DOUBLE_EQ(overlong_penalty(buffer, 9, 10), -0.375);  // −3/4 · 0.5
  buffer.enable = false;
  EXPECT_DOUBLE_EQ(overlong_penalty(buffer, 10, 10), 0.0);
}

std::string refusal(const std::vector<std::string>& overrides) {
  try {
    parse_config("", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(DapoReward, ConfigRefusesWhatItCannotHonour) {
  EXPECT_NE(refusal({"reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=4"})
                .find("needs reward_model.reward_manager=dapo"),
            std::string::npos);
  EXPECT_NE(refusal({"reward_model.reward_manager=dapo", "reward_model.overlong_buffer.enable=true",
                     "reward_model.overlong_buffer.len=0"})
                .find("reward_model.overlong_buffer.len = 0: must be in 1..data.max_response_length"),
            std::string::npos);
  EXPECT_NE(refusal({"data.gen_batch_size=8"}).find("data.gen_batch_size = 8 is read by dynamic sampling only"),
            std::string::npos);
  EXPECT_NE(refusal({"algorithm.filter_groups.enable=true", "algorithm.adv_estimator=grpo",
                     "actor_rollout_ref.rollout.n=1"})
                .find("a group of one never varies"),
            std::string::npos);
  // The enum keys refuse an unknown value when the config is read, naming the spellings of the key
  // table (and the nearest one).
  EXPECT_NE(refusal({"reward_model.reward_manager=prime"})
                .find("reward_model.reward_manager: expected one of naive, dapo, got 'prime'"),
            std::string::npos);
  EXPECT_NE(refusal({"algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=seq_final_reward",
                     "actor_rollout_ref.rollout.n=4", "algorithm.adv_estimator=grpo"})
                .find("algorithm.filter_groups.metric: expected one of acc, score, seq_reward, got 'seq_final_reward'"),
            std::string::npos);
  EXPECT_NE(refusal({"algorithm.rollout_correction.rollout_is=tokens"})
                .find("algorithm.rollout_correction.rollout_is: expected one of null, token, sequence, geometric, got "
                      "'tokens' — did you mean token?"),
            std::string::npos);
  EXPECT_NE(refusal({"algorithm.rollout_correction.rollout_is=geometric"})
                .find("algorithm.rollout_correction.rollout_is = geometric: must be null, token or sequence"),
            std::string::npos);
  // Parsed once into the enums: what the trainer branches on.
  const Config dapo = parse_config("", {"reward_model.reward_manager=dapo", "algorithm.filter_groups.metric=seq_reward",
                                        "algorithm.rollout_correction.rollout_is=sequence"});
  EXPECT_EQ(dapo.reward_model.reward_manager, RewardManager::kDapo);
  EXPECT_EQ(dapo.algorithm.filter_groups.metric, FilterGroupsMetric::kSeqReward);
  EXPECT_EQ(dapo.algorithm.rollout_correction.rollout_is, RolloutCorrectionLevel::kSequence);
  EXPECT_EQ(dapo.algorithm.rollout_correction.rollout_rs, RolloutCorrectionLevel::kNull);
  EXPECT_NE(refusal({"algorithm.rollout_correction.rollout_rs=geometric"})
                .find("needs algorithm.rollout_correction.rollout_rs_threshold > 0"),
            std::string::npos);
  EXPECT_EQ(refusal({"algorithm.rollout_correction.rollout_rs=geometric",
                     "algorithm.rollout_correction.rollout_rs_threshold=1.001"}),
            "");
}

}  // namespace
}  // namespace hs::trainer
