// checkpoint.h — verl's checkpoint layout, resumable exactly:
//   <default_local_dir>/latest_checkpointed_iteration.txt   the last complete step
//   <default_local_dir>/global_step_<N>/actor/{config.json, model.safetensors, optim.pt}
//   <default_local_dir>/global_step_<N>/critic/...           (PPO)
//   <default_local_dir>/global_step_<N>/trainer_state.json   step, data position, KL coefficient
// A checkpoint is written into a temporary directory and renamed into place, so a crash never
// leaves a half-written global_step_<N> behind. Randomness is a pure function of (seed, step)
// (loop/random_streams.h), so restoring the step restores every random stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <torch/optim/adamw.h>

#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {

struct TrainerState {
  std::int64_t global_step = 0;
  DataLoader::State data{};
  double kl_coef = 0.0;
  std::uint64_t seed = 0;
};

struct CheckpointParts {
  Transformer* actor = nullptr;
  torch::optim::AdamW* actor_optim = nullptr;
  Transformer* critic = nullptr;  // null without a critic
  torch::optim::AdamW* critic_optim = nullptr;
};

/// Writes global_step_<state.global_step> under `root` and updates the latest marker; returns its path.
std::string save_checkpoint(const std::string& root, const TrainerState& state, const CheckpointParts& parts);

/// The directory of the latest complete checkpoint under `root`, if any.
std::optional<std::string> find_latest_checkpoint(const std::string& root);

/// Restores `parts` from `dir` and returns the trainer state. Throws std::runtime_error naming the
/// file when something is missing or does not match the model.
TrainerState load_checkpoint(const std::string& dir, const CheckpointParts& parts);

/// Copies tensors (by HuggingFace name) into the module's parameters; every parameter must be present.
void load_weights_into(Transformer& model, const std::string& safetensors_path);

}  // namespace hs::trainer
