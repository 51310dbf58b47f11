// checkpoint_command.h — `hybridscope checkpoint merge ACTOR_DIR OUT_DIR`: assemble a sharded
// actor checkpoint (tp/pp/fsdp ranks' pieces) into one HuggingFace directory
// (hs::trainer::merge_actor_shards; docs/cli.md).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace hs::cli {

struct CheckpointMergeArgs {
  std::string actor_dir;  // .../global_step_<N>/actor
  std::string out_dir;    // where config.json and model.safetensors go
};

/// Registers `checkpoint` and its `merge` subcommand on `app`, parsing into `args` (which must
/// outlive parsing); returns the `merge` subcommand.
CLI::App* add_checkpoint_command(CLI::App& app, CheckpointMergeArgs& args);

/// Merges the shards and prints where the model went.
int run_checkpoint_merge(const CheckpointMergeArgs& args);

}  // namespace hs::cli
