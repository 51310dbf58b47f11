// checkpoint_command.cpp — see checkpoint_command.h. The merge is hs::trainer's (checkpoint.h).
#include "checkpoint_command.h"

#include <fmt/format.h>

#include "hybridscope/trainer/loop/checkpoint.h"

namespace hs::cli {

CLI::App* add_checkpoint_command(CLI::App& app, CheckpointMergeArgs& args) {
  auto* cmd = app.add_subcommand("checkpoint", "Work with trainer checkpoints");
  cmd->require_subcommand(1);
  auto* merge = cmd->add_subcommand(
      "merge", "Assemble a sharded actor checkpoint (tp/pp/fsdp ranks' pieces) into one HuggingFace directory");
  merge->add_option("actor_dir", args.actor_dir, "The checkpoint's actor directory (.../global_step_<N>/actor)")
      ->required()
      ->check(CLI::ExistingDirectory);
  merge->add_option("out_dir", args.out_dir, "Where to write config.json and model.safetensors")->required();
  return merge;
}

int run_checkpoint_merge(const CheckpointMergeArgs& args) {
  const auto parameters = trainer::merge_actor_shards(args.actor_dir, args.out_dir);
  fmt::print("merged the shards of {} into {} ({} parameters): load it with actor_rollout_ref.model.path={} or "
             "transformers' from_pretrained\n", args.actor_dir, args.out_dir, parameters, args.out_dir);
  return 0;
}

}  // namespace hs::cli
