// advantage.h — verl's compute_advantage (trainer/ppo/ray_trainer.py): the batch's advantages and
// returns from the estimator algorithm.adv_estimator names, with that estimator's arguments taken
// from the algorithm section. The estimators themselves are core_algos.h's; the KL penalty in the
// reward (apply_kl_penalty) comes before, as in verl's fit().
#pragma once

#include "hybridscope/trainer/data/batch.h"
#include "hybridscope/trainer/config/config.h"
#include "hybridscope/trainer/rl/core_algos.h"

namespace hs::trainer {

/// Reads batch.token_level_rewards and response_mask, and per estimator: values (gae), uid (grpo,
/// rloo, reinforce_plus_plus_baseline), reward_baselines (remax). GRPO's epsilon is verl's 1e-6.
AdvantageReturn compute_advantage(const RolloutBatch& batch, const AlgorithmConfig& algorithm);

}  // namespace hs::trainer
