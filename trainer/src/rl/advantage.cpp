// advantage.cpp — compute_advantage: one estimator per algorithm.adv_estimator.
#include "hybridscope/trainer/rl/advantage.h"

#include <stdexcept>

namespace hs::trainer {

AdvantageReturn compute_advantage(const RolloutBatch& batch, const AlgorithmConfig& alg) {
  switch (alg.adv_estimator) {
    case AdvEstimator::kGae:
      return compute_gae_advantage_return(batch.token_level_rewards, batch.values, batch.response_mask, alg.gamma,
                                          alg.lam);
    case AdvEstimator::kGrpo:
      return compute_grpo_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid, 1e-6,
                                            alg.norm_adv_by_std_in_grpo);
    case AdvEstimator::kRloo:
      return compute_rloo_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid);
    case AdvEstimator::kReinforcePlusPlus:
      return compute_reinforce_plus_plus_outcome_advantage(batch.token_level_rewards, batch.response_mask, alg.gamma);
    case AdvEstimator::kReinforcePlusPlusBaseline:
      return compute_reinforce_plus_plus_baseline_outcome_advantage(batch.token_level_rewards, batch.response_mask,
                                                                    batch.uid);
    case AdvEstimator::kRemax:
      return compute_remax_outcome_advantage(batch.token_level_rewards, batch.reward_baselines, batch.response_mask);
    case AdvEstimator::kOpo:
      return compute_opo_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid);
    case AdvEstimator::kGrpoPassk:
      return compute_grpo_passk_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid, 1e-6,
                                                  alg.norm_adv_by_std_in_grpo);
    case AdvEstimator::kGpg:
      return compute_gpg_outcome_advantage(batch.token_level_rewards, batch.response_mask, batch.uid);
  }
  throw std::invalid_argument("compute_advantage: unknown algorithm.adv_estimator");
}

}  // namespace hs::trainer
