// batch.h — one step's experience (verl's DataProto for this trainer): prompts and responses as
// padded tensors plus everything the phases add (log-probs, values, rewards, advantages).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "hybridscope/trainer/data/dataset.h"

namespace hs::trainer {

struct RolloutBatch {
  // Inputs, (B = prompts x n samples), P = longest prompt, R = longest response.
  torch::Tensor prompts;         // (B, P) int64, left-padded with pad
  torch::Tensor responses;       // (B, R) int64, right-padded with pad
  torch::Tensor input_ids;       // (B, P + R)
  torch::Tensor attention_mask;  // (B, P + R) int64 {0, 1}
  torch::Tensor position_ids;    // (B, P + R) int64
  torch::Tensor response_mask;   // (B, R) float, 1 up to and including EOS
  std::vector<std::int64_t> uid;  // group id (the prompt's index in the step) per sample
  std::vector<std::string> ground_truth;
  std::vector<std::string> data_source;

  // Added by the phases (undefined until then).
  torch::Tensor rollout_log_probs;    // (B, R) float32: log π_rollout as the rollout engine sampled (0 past EOS)
  torch::Tensor rollout_is_weights;   // (B, R): rollout correction's IS weights (rollout_correction.h), when on
  torch::Tensor old_log_probs;        // (B, R) float32
  torch::Tensor ref_log_probs;        // (B, R)
  torch::Tensor values;               // (B, R)
  torch::Tensor token_level_scores;   // (B, R) the score at the last response token
  torch::Tensor token_level_rewards;  // (B, R) scores minus the KL penalty when in reward
  torch::Tensor advantages;           // (B, R)
  torch::Tensor returns;              // (B, R)
  torch::Tensor reward_baselines;     // (B) ReMax: score of the greedy response

  std::int64_t size() const { return responses.size(0); }
  std::int64_t prompt_length() const { return prompts.size(1); }
  std::int64_t response_length() const { return responses.size(1); }
  /// The rows `index` of every defined tensor and vector.
  RolloutBatch select(const std::vector<std::int64_t>& index) const;
  /// Every defined tensor on `device` (the same tensors when they are there already): a
  /// micro-batch on its way to a model (device.h).
  RolloutBatch to(const torch::Device& device) const;
};

/// Builds the padded tensors from token lists: responses[i] belongs to prompts[i / n].
RolloutBatch make_rollout_batch(const std::vector<std::vector<std::int32_t>>& prompts,
                                const std::vector<std::vector<std::int32_t>>& responses, int n,
                                int pad_token_id, int eos_token_id);

}  // namespace hs::trainer
