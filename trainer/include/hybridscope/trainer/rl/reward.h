// reward.h — rule-based reward functions (verl's default_compute_score). Free of LibTorch.
#pragma once

#include <optional>
#include <string>

#include "hybridscope/trainer/config/config.h"

namespace hs::trainer {

/// GSM8K's convention: the answer after "#### " in the last 300 characters of the response
/// (verl gsm8k.extract_solution, strict), with ',' and '$' removed. nullopt when absent.
std::optional<std::string> extract_gsm8k_answer(const std::string& solution_str);

/// 1.0 when the extracted answer equals ground_truth exactly, format_score when an answer is
/// present but wrong, 0.0 when none is present (verl's gsm8k.compute_score).
double gsm8k_compute_score(const std::string& solution_str, const std::string& ground_truth,
                           double format_score = 0.0, double score = 1.0);

/// The score of `rule` (reward_model.rule). verl picks the rule from data_source; here the
/// config names it, and data_source is accepted for that signature's sake.
double compute_score(RewardRule rule, const std::string& data_source,
                     const std::string& solution_str, const std::string& ground_truth);

}  // namespace hs::trainer
