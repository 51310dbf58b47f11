// checkpoint.h — verl's checkpoint layout, resumable exactly:
//   <default_local_dir>/latest_checkpointed_iteration.txt   the last complete step
//   <default_local_dir>/global_step_<N>/actor/{config.json, model.safetensors, optim.pt}
//   <default_local_dir>/global_step_<N>/critic/...           (PPO)
//   <default_local_dir>/global_step_<N>/trainer_state.json   step, data position, KL coefficient,
//                                                            parameter version, split rollout placement
//   <default_local_dir>/global_step_<N>/rollout/{config.json, model.safetensors}
//                                  one_step_off: the weights the rollout pool generates batch N+1 with
// A sharded actor (tp/pp, or fsdp over dp) writes, instead of its actor/ files, one piece per rank:
//   actor/shards/rank_<r>.safetensors  the rank's boxes of the training layout, by parameter name
//   actor/shards/optim_<r>.pt          its AdamW state (over those pieces)
//   actor/layout.json, actor/config.json  the mesh and sharding, and the model (hf_config.h)
// It resumes in the same layout; `hybridscope checkpoint merge` (merge_actor_shards) assembles the
// pieces into a HuggingFace directory that transformers and actor_rollout_ref.model.path load.
// A checkpoint is written into a temporary directory and renamed into place, so a crash never
// leaves a half-written global_step_<N> behind. Randomness is a pure function of (seed, step)
// (loop/random_streams.h), so restoring the step restores every random stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <torch/optim/adamw.h>

#include "hybridscope/trainer/data/dataset.h"
#include "hybridscope/trainer/dist/layout.h"
#include "hybridscope/trainer/model/model.h"

namespace hs::trainer {

struct TrainerState {
  std::int64_t global_step = 0;
  DataLoader::State data{};
  double kl_coef = 0.0;
  std::uint64_t seed = 0;
  /// The actor updates applied so far: the version of the saved weights (a split rollout pool's
  /// async/param_version). Absent from older checkpoints: 0.
  std::int64_t param_version = 0;
  /// A split rollout pool's placement and mode, e.g. "rollout ranks [1], async_mode one_step_off";
  /// empty: the actor generates (colocated), or a checkpoint from before split runs could resume.
  std::string rollout_placement;
  /// one_step_off: the version of rollout/model.safetensors (the weights batch global_step + 1 is
  /// generated with); -1: the checkpoint has none.
  std::int64_t rollout_version = -1;
};

struct CheckpointParts {
  Transformer* actor = nullptr;
  torch::optim::AdamW* actor_optim = nullptr;
  Transformer* critic = nullptr;  // null without a critic
  torch::optim::AdamW* critic_optim = nullptr;
  Transformer* rollout = nullptr;  // one_step_off: the rollout pool's weights, saved (never loaded) as rollout/
};

/// Writes global_step_<state.global_step> under `root` and updates the latest marker; returns its path.
std::string save_checkpoint(const std::string& root, const TrainerState& state, const CheckpointParts& parts);

/// A sharded actor's part of a checkpoint, as one actor rank holds it.
struct ActorShard {
  int rank = 0;  // this rank's index in the actor's mesh (LayoutSet::coords)
  MeshShape mesh;
  DpSharding sharding = DpSharding::kReplicated;
  ModelShape shape;
  /// This rank's boxes of training_layout(llama_parameters(shape), mesh, sharding), by name:
  /// tensors that alias the live parameters (megatron) or fsdp shards.
  std::vector<std::pair<std::string, torch::Tensor>> pieces;
  torch::optim::AdamW* optim = nullptr;
};

/// The staging directory of step `step`'s checkpoint under `root`; begin_checkpoint (one rank)
/// empties and creates it, every rank then writes its part, commit_checkpoint (the same rank)
/// adds the critic and trainer_state.json and renames it into place. save_checkpoint does all
/// three for an unsharded actor.
std::string checkpoint_staging_dir(const std::string& root, std::int64_t step);
void begin_checkpoint(const std::string& root, std::int64_t step);
/// parts.actor null: the actor's part is already in the staging directory (save_actor_shard).
std::string commit_checkpoint(const std::string& root, const TrainerState& state, const CheckpointParts& parts);
/// Writes `shard`'s files into staging_dir/actor (rank 0 also layout.json and config.json).
void save_actor_shard(const std::string& staging_dir, const ActorShard& shard);
/// The trainer state of checkpoint `dir` (trainer_state.json) alone.
TrainerState load_trainer_state(const std::string& dir);
/// Restores `shard`'s pieces and optimizer from checkpoint `dir`. Throws std::runtime_error when the
/// checkpoint is not sharded, or was saved on another mesh or sharding (naming both) — resume in
/// the layout it was saved in, or merge it and start from actor_rollout_ref.model.path.
void load_actor_shard(const std::string& dir, const ActorShard& shard);
/// `hybridscope checkpoint merge`: the whole actor of a sharded checkpoint (`actor_dir` =
/// global_step_<N>/actor) as a HuggingFace directory `out_dir` (config.json, model.safetensors in
/// float32). Every element of every parameter must be covered by some rank's piece; throws
/// std::runtime_error naming the missing file or parameter otherwise. Returns the parameter count.
std::int64_t merge_actor_shards(const std::string& actor_dir, const std::string& out_dir);

/// The directory of the latest complete checkpoint under `root`, if any.
std::optional<std::string> find_latest_checkpoint(const std::string& root);

/// Restores `parts` from `dir` and returns the trainer state; parts.actor null: only the critic (a
/// sharded actor resumes with load_actor_shard). Throws std::runtime_error naming the file when
/// something is missing or does not match the model.
TrainerState load_checkpoint(const std::string& dir, const CheckpointParts& parts);

/// Copies tensors (by HuggingFace name) into the module's parameters; every parameter must be present.
void load_weights_into(Transformer& model, const std::string& safetensors_path);

}  // namespace hs::trainer
